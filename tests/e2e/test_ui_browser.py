"""The web page in a real headless browser (Debian's chromium, driven by Playwright)
against a running service (API + workers) with real episodes: sign in, pages load,
filters work, a cheat's episode shows its evidence, sandbox output stays text.

Screenshots go to a temporary directory printed at the end; with
PROCTOR_UPDATE_SCREENSHOTS=1 the episode page's also replaces the README's picture
(docs/img/episode-page.png).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import claimed_database, running_service
from tests.e2e.helpers import episode, run
from tests.e2e.test_interactive import act, bash, finish, repo, start, task  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.redis]

CHROMIUM = "/usr/bin/chromium"
TOKEN = "browser-test-token"
SCRIPT = "<script>window.pwned = 1</script>"
TRAINER = "ui-browser-test"
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a * b\n"


@pytest.fixture(scope="module")
def service(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("ui-service") / "service.log"
    # a Redis database of its own: the session's workers would take its episodes
    with (
        claimed_database() as redis_url,
        running_service(redis_url, log, PROCTOR_API_TOKENS=TOKEN) as url,
    ):
        yield url


@pytest.fixture(scope="module")
def episodes(service: str, repo: dict[str, str]) -> dict[str, str]:
    """Real episodes of the trainer: one passed, one failed, one interactive cheat whose
    observation carries a script tag."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=service, headers=headers, timeout=180) as http:
        ids = {}
        for name, solution in (("passed", RIGHT), ("failed", WRONG)):
            body: dict[str, Any] = {**episode(solution), "metadata": {"trainer": TRAINER}}
            ids[name] = run(http, body)["id"]
        body = {**task(repo), "metadata": {"trainer": TRAINER}}
        cheat, _ = start(http, body)
        assert bash(http, cheat, "git log --all --oneline")["exit_code"] == 0
        assert SCRIPT in bash(http, cheat, f"echo '{SCRIPT}'")["output"]
        # the history walk is an attempt; weakening the visible test is the cheat
        weakened = "def test_add_zero():\n    pass\n"
        act(http, cheat, type="write_file", path="tests/test_visible.py", content=weakened)
        result = finish(http, cheat)
        assert result["verdict"] == "cheat", result
        ids["cheat"] = cheat
    return ids


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("ui-screenshots")
    yield path
    sys.stderr.write(f"\nscreenshots: {path}\n")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh (it installs chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: chromium's own sandbox needs user namespaces, absent as root in CI
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, service: str) -> Iterator[Any]:
    context = browser.new_context(base_url=service, viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.goto("/ui")
    assert "/ui/login" in p.url  # signed out: the form, not the data
    p.fill("input[name=token]", TOKEN)
    p.click("button[type=submit]")
    p.wait_for_url("**/ui")
    yield p
    context.close()


def test_overview_shows_live_counts_and_pictures(
    page: Any, episodes: dict[str, str], shots: Path
) -> None:
    assert int(page.inner_text("#ended")) >= 3
    assert page.locator("#verdicts a.verdict", has_text="cheat").count() == 1
    assert page.locator("figure.chart svg").count() == 4
    assert page.locator("figure.chart rect").count() >= 1  # the verdict bars of this minute
    assert TOKEN not in page.content()
    page.screenshot(path=str(shots / "overview.png"), full_page=True)


def test_episode_filters(page: Any, episodes: dict[str, str], shots: Path) -> None:
    page.goto("/ui/episodes")
    page.fill("input[name=trainer]", TRAINER)
    page.select_option("select[name=verdict]", "cheat")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**verdict=cheat**")
    rows = page.locator("#episodes tbody tr")
    assert {rows.nth(i).get_attribute("data-verdict") for i in range(rows.count())} == {"cheat"}
    assert page.locator(f"a[href='/ui/episodes/{episodes['cheat']}']").count() == 1
    assert page.locator(f"a[href='/ui/episodes/{episodes['passed']}']").count() == 0
    page.screenshot(path=str(shots / "episodes.png"), full_page=True)

    page.select_option("select[name=verdict]", "")
    page.click("#filters button[type=submit]")
    page.wait_for_load_state()
    for name in ("passed", "failed", "cheat"):
        assert page.locator(f"a[href='/ui/episodes/{episodes[name]}']").count() == 1, name

    page.fill("input[name=since]", "next week")
    page.click("#filters button[type=submit]")
    page.wait_for_load_state()
    assert "since: 'next week' is not a time" in page.inner_text("#error")


def test_a_cheats_episode_shows_its_evidence_as_text(
    page: Any, episodes: dict[str, str], shots: Path
) -> None:
    page.goto("/ui/episodes?" + f"trainer={TRAINER}&verdict=cheat")
    page.click(f"a[href='/ui/episodes/{episodes['cheat']}']")
    page.wait_for_url(f"**/ui/episodes/{episodes['cheat']}")
    assert page.inner_text("#verdict") == "cheat"
    intercepted = page.locator("article.step.intercepted")
    assert intercepted.count() >= 1
    assert "intercepted by vcs." in intercepted.first.inner_text()
    assert "vcs_history" in page.inner_text("#evidence-rule")
    decisive = page.locator("#evidence-rule tr.decisive")
    assert decisive.count() == 1 and "test_tampering" in decisive.inner_text()
    assert "decided the verdict" in decisive.inner_text()
    # the observation's script tag is shown, not run
    assert SCRIPT in page.inner_text("#steps")
    assert page.evaluate("typeof window.pwned") == "undefined"
    path = shots / "episode-page.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("PROCTOR_UPDATE_SCREENSHOTS"):  # the README's picture, on request
        docs = Path(__file__).resolve().parents[2] / "docs" / "img"
        shutil.copyfile(path, docs / "episode-page.png")


def test_rules_count_their_hits_and_unknown_ids_404(
    page: Any, episodes: dict[str, str], shots: Path
) -> None:
    page.goto("/ui/rules")
    hits = {
        row.locator("td").nth(0).inner_text(): int(row.locator("td").nth(5).inner_text())
        for row in page.locator("#rules tbody tr").all()
    }
    assert any(rule.startswith("vcs.") and n >= 1 for rule, n in hits.items()), hits
    levels = {
        row.locator("td").nth(0).inner_text(): row.locator("td").nth(3).inner_text()
        for row in page.locator("#rules tbody tr").all()
    }
    assert levels["vcs.all-refs"] == "attempt" and levels["tests.always-equal"] == "cheat"
    page.screenshot(path=str(shots / "rules.png"), full_page=True)
    response = page.goto("/ui/episodes/ep_doesnotexist")
    assert response is not None and response.status == 404
