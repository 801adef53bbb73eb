"""The task image spec of `proctor images build-task` (proctor/imagebuild/taskimage.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.imagebuild.config import ImageBuildError
from proctor.imagebuild.taskimage import TaskImageSpec, dockerfile, labels, names_registry


def spec(tmp_path: Path, **fields: object) -> TaskImageSpec:
    (tmp_path / "repo.bundle").write_bytes(b"")
    raw = {"image": "127.0.0.1:5000/swe/x:1", "repo": {"bundle": "repo.bundle"}, **fields}
    return TaskImageSpec.parse(raw, root=tmp_path)


def test_defaults_and_push_follow_the_name(tmp_path: Path) -> None:
    parsed = spec(tmp_path)
    assert parsed.path == "/testbed" and parsed.user == "1000:1000" and parsed.push
    assert not spec(tmp_path, image="swe-x:1").push
    assert spec(tmp_path, image="swe-x:1", push=True).push


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("127.0.0.1:5000/a:b", True),
        ("registry.example.org/a/b", True),
        ("localhost/a", True),
        ("xingyaoww/sweb.eval:latest", False),
        ("plain:tag", False),
    ],
)
def test_a_registry_is_told_by_the_first_component(image: str, registry: bool) -> None:
    assert names_registry(image) is registry


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"image": ""}, "non-empty"),
        ({"repo": {"bundle": "repo.bundle", "archive": "a.tar"}}, "one of"),
        ({"repo": {"archive": "missing.tar"}}, "no such file"),
        ({"repo": {"bundle": "repo.bundle", "path": "relative"}}, "absolute path"),
        ({"repo": {"bundle": "repo.bundle", "path": "/workspace"}}, "of its own"),
        ({"surprise": 1}, "unknown spec fields"),
    ],
)
def test_bad_specs_say_why(tmp_path: Path, fields: dict[str, object], why: str) -> None:
    with pytest.raises(ImageBuildError, match=why):
        spec(tmp_path, **fields)


def test_requirements_and_install_commands_reach_the_dockerfile(tmp_path: Path) -> None:
    (tmp_path / "reqs.txt").write_text("six==1.16.0\n\n")
    parsed = spec(
        tmp_path,
        requirements=["attrs"],
        requirements_file="reqs.txt",
        install="pip install -e .",
        test_command="pytest -q",
    )
    assert parsed.requirements == ["attrs", "six==1.16.0"]
    text = dockerfile(parsed, "abc")
    assert "COPY --chown=1000:1000 repo/ /testbed/" in text
    assert "PIP_NO_INDEX=1" in text and "sh -ec 'pip install -e .'" in text
    assert text.rstrip().endswith("USER 1000:1000")
    assert labels(parsed, "abc") == {
        "org.proctor.task.path": "/testbed",
        "org.proctor.task.base_commit": "abc",
        "org.proctor.task.test_command": "pytest -q",
    }
