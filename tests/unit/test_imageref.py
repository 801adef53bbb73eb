"""Image references: what `task.image` takes beside a name, and what it refuses (422)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from proctor.imageref import BadReference, allowed, check_reference, digest_of, is_reference
from proctor.models import TaskSpec, TestSpec

DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "image",
    [
        "127.0.0.1:5000/swe/django__django-11099:latest",
        f"127.0.0.1:5000/swe/django@{DIGEST}",
        f"registry.example.org/a/b:v1@{DIGEST}",
        "localhost/x",
        "xingyaoww/sweb.eval.x86_64.django_s_django-11099:latest",
    ],
)
def test_well_formed_references_pass(image: str) -> None:
    assert is_reference(image)
    assert check_reference(image) == image
    assert TaskSpec(image=image, tests=TestSpec(files={})).image == image


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("https://127.0.0.1:5000/a:b", "no scheme"),
        ("user:secret@127.0.0.1:5000/a:b", "no credentials"),
        ("127.0.0.1:5000/a@sha256:abc", "malformed digest"),
        ("127.0.0.1:5000/a@md5:" + "a" * 32, "malformed digest"),
        ("127.0.0.1:5000/a@" + DIGEST.upper(), "malformed digest"),
        ("127.0.0.1:5000/Upper:b", "not an image reference"),
        ("127.0.0.1:5000/a:b c", "not an image reference"),
        ("127.0.0.1:5000/" + "a" * 600, "at most"),
    ],
)
def test_bad_references_are_refused(image: str, why: str) -> None:
    with pytest.raises(BadReference, match=why):
        check_reference(image)
    with pytest.raises(ValidationError, match=why):
        TaskSpec(image=image, tests=TestSpec(files={}))


def test_names_are_not_references() -> None:
    assert not is_reference("python")
    assert TaskSpec(image="python-sci", tests=TestSpec(files={})).image == "python-sci"


def test_patterns_are_globs_across_slashes() -> None:
    patterns = ["127.0.0.1:5000/swe/*"]
    assert allowed("127.0.0.1:5000/swe/a/b:c", patterns)
    assert not allowed("127.0.0.1:5001/swe/a:b", patterns)
    assert not allowed("127.0.0.1:5000/other/a:b", patterns)
    assert not allowed("127.0.0.1:5000/swe/a:b", [])


def test_the_pinned_digest_is_read() -> None:
    assert digest_of(f"h:1/a@{DIGEST}") == DIGEST
    assert digest_of("h:1/a:b") is None
