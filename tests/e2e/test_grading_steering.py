"""Only the task's configuration steers the test run (issue 10, item 1).

Each attack here earned reward 1.0 under the grader before the grader plugin and its seal
(rule filter off, so the sandbox and the grader are tested on their own); each legitimate
look-alike beside it must keep passing.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import claimed_database, running_service
from tests.e2e.helpers import TEST_ADD, episode, play, run, writes

WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
FORCE_PASS = """\
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
FORGED_XML = (
    '<testsuites><testsuite><testcase classname="test_solution" name="test_small" '
    'file="test_solution.py"/><testcase classname="test_solution" name="test_zero" '
    'file="test_solution.py"/></testsuite></testsuites>'
)
ATEXIT_FORGE = f"""\
import atexit, os

def add(a, b):
    return a - b

def _forge():
    with open(os.environ["PROCTOR_JUNIT_XML"], "w") as f:
        f.write({FORGED_XML!r})
    os._exit(0)

atexit.register(_forge)
"""
DEL_FORGE = f"""\
import os

def add(a, b):
    return a - b

class _Forger:  # finalised at interpreter exit, when builtins are gone: keep what it needs
    def __init__(self):
        self.path, self.open, self.exit = os.environ["PROCTOR_JUNIT_XML"], open, os._exit

    def __del__(self):
        with self.open(self.path, "w") as f:
            f.write({FORGED_XML!r})
        self.exit(0)

_forger = _Forger()
"""


def unscreened(solution: str, files: dict[str, str] | None = None) -> dict[str, Any]:
    body = episode(solution, unscreened=True)
    body["solution"]["files"].update(files or {})
    return body


@pytest.mark.parametrize("metadata", ["evil-1.0.dist-info", "evil.egg-info"])
def test_installed_distribution_plugin_does_not_load(http: httpx.Client, metadata: str) -> None:
    body = unscreened(
        WRONG,
        {
            f"{metadata}/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
            f"{metadata}/PKG-INFO": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
            f"{metadata}/entry_points.txt": "[pytest11]\nevil = evil_plugin\n",
            "evil_plugin.py": FORCE_PASS,
        },
    )
    result = run(http, body)
    assert (result["verdict"], result["reward"]) == ("failed", 0.0), result
    outcomes = {t["name"]: t["outcome"] for t in result["tests"]}
    assert outcomes["test_solution.py::test_small"] == "failed"


@pytest.mark.parametrize("forge", [ATEXIT_FORGE, DEL_FORGE], ids=["atexit", "del"])
def test_report_forged_at_exit_fails(http: httpx.Client, forge: str) -> None:
    """Split grading (these are plain test functions): the solution's process knows no report
    path (the `del` forge fails at import, a runtime error) and its writes reach no record.
    In-process, the grader's audit hook refuses the write to its directory; were it to land,
    it would carry no seal."""
    result = run(http, unscreened(forge))
    assert (result["reward"], result["passed"]) == (0.0, False), result["reason"]
    assert result["verdict"] in ("failed", "runtime_error"), result["reason"]
    genuine = result["reason"] in ("1 of 2 tests did not pass", "a test module failed to import")
    assert genuine or "seal" in result["reason"], result["reason"]


def test_shadowed_pytest_does_not_run(http: httpx.Client) -> None:
    # `python3 -m pytest` from the workspace used to import the workspace's pytest.py
    fake = (
        "import os\n"
        f"open(os.environ['PROCTOR_JUNIT_XML'], 'w').write({FORGED_XML!r})\n"
        "raise SystemExit(0)\n"
    )
    body = unscreened(WRONG, {"pytest.py": fake})
    body["task"]["tests"]["command"] = "python3 -m pytest -q test_solution.py"
    result = run(http, body)
    assert (result["verdict"], result["reward"]) == ("failed", 0.0), result


def test_task_configuration_and_conftest_still_apply(http: httpx.Client) -> None:
    body = episode(RIGHT)
    body["task"]["files"] = {
        "pytest.ini": "[pytest]\naddopts = --strict-markers\nmarkers =\n    arith: arithmetic\n",
        "conftest.py": "import pytest\n\n@pytest.fixture\ndef two():\n    return 2\n",
    }
    body["task"]["tests"]["files"]["test_solution.py"] = textwrap.dedent("""\
        import pytest
        from solution import add

        @pytest.mark.arith
        def test_fixture_from_task_conftest(two):
            assert add(two, two) == 4
        """)
    result = run(http, body)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result
    # the same configuration with a wrong answer still fails
    body["solution"]["files"]["solution.py"] = WRONG
    result = run(http, body)
    assert (result["verdict"], result["reward"]) == ("failed", 0.0), result


# --- pytest plugins the image installed keep working, and the workspace cannot stand in

PLUGGED_IMAGE = "proctor/test-grader-plugged:latest"
IMAGE_PLUGIN = """\
import pytest

def pytest_addoption(parser):
    parser.addoption("--imgplug-answer", type=int, default=42)

@pytest.fixture
def image_answer(request):
    return request.config.getoption("imgplug_answer")
"""
SITE = "/usr/local/lib/python3.11/dist-packages"
IMAGE_FILES = {
    "imgplug.py": IMAGE_PLUGIN,
    "imgplug-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: imgplug\nVersion: 1.0\n",
    "imgplug-1.0.dist-info/entry_points.txt": "[pytest11]\nimgplug = imgplug\n",
}
# COPY leaves the files root's and read-only to the sandbox user, as an image install does
DOCKERFILE = f"FROM proctor/sandbox-python:latest\nCOPY site/ {SITE}/\n"


@pytest.fixture(scope="module")
def plugged_service(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A deployment of its own (its own Redis database, so no other worker takes its
    episodes) that serves an image with a pytest plugin installed."""
    context: Path = tmp_path_factory.mktemp("plugged")
    (context / "Dockerfile").write_text(DOCKERFILE)
    for name, text in IMAGE_FILES.items():
        (context / "site" / name).parent.mkdir(parents=True, exist_ok=True)
        (context / "site" / name).write_text(text)
    subprocess.run(
        ["docker", "build", "-q", "-t", PLUGGED_IMAGE, str(context)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    try:
        images = f"python=proctor/sandbox-python:latest,plugged={PLUGGED_IMAGE}"
        with (
            claimed_database() as redis_url,
            running_service(
                redis_url, context / "service.log", PROCTOR_IMAGES=images, PROCTOR_POOL_SIZE="0"
            ) as url,
        ):
            yield url
    finally:
        subprocess.run(
            ["docker", "image", "rm", "-f", PLUGGED_IMAGE], capture_output=True, timeout=120
        )


def test_image_plugins_load_and_the_workspace_cannot_replace_them(plugged_service: str) -> None:
    tests = textwrap.dedent("""\
        from solution import add

        def test_uses_the_image_plugin(image_answer):
            assert add(image_answer, 1) == 43
        """)
    with httpx.Client(base_url=plugged_service, timeout=180) as http:
        body = episode(RIGHT, tests=tests)
        body["task"]["image"] = "plugged"
        result = run(http, body, wait=170)
        assert (result["verdict"], result["reward"]) == ("passed", 1.0), result
        # a workspace module of the plugin's name cannot stand in for it
        body = episode(WRONG, tests=tests, unscreened=True)
        body["task"]["image"] = "plugged"
        body["solution"]["files"]["imgplug.py"] = FORCE_PASS
        result = run(http, body, wait=170)
        assert (result["verdict"], result["reward"]) == ("failed", 0.0), result


def interactive(http: httpx.Client, files: dict[str, str]) -> dict[str, Any]:
    """An interactive episode whose agent writes `files`, then finishes."""
    body = {
        "mode": "interactive",
        "task": {
            "image": "python",
            "policy": {"disabled_rules": ["*"]},
            "files": {"solution.py": WRONG},
            "tests": {"files": {"test_solution.py": TEST_ADD}},
            "limits": {"timeout_s": 10},
        },
    }
    return play(http, body, writes(files))


def test_interactive_grading_is_steered_by_the_task_alone(http: httpx.Client) -> None:
    planted = interactive(
        http,
        {
            "evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
            "evil-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = evil_plugin\n",
            "evil_plugin.py": FORCE_PASS,
        },
    )
    assert (planted["verdict"], planted["reward"]) == ("failed", 0.0), planted
    forged = interactive(http, {"solution.py": ATEXIT_FORGE})
    assert (forged["verdict"], forged["reward"]) == ("failed", 0.0), forged
    fixed = interactive(http, {"solution.py": RIGHT})
    assert (fixed["verdict"], fixed["reward"]) == ("passed", 1.0), fixed
