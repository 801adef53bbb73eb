"""The scientific image's build inputs: binary wheels for bookworm's glibc, a requirements
file pip can read offline, and a place after the Python sandbox it is built on."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement

from proctor.imagebuild import builder
from proctor.imagebuild.wheels import manylinux_platforms

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "images" / "sandbox-python-sci"
DEBIAN_BOOKWORM_GLIBC = (2, 36)


def requirements() -> list[Requirement]:
    found = []
    for line in (HERE / "requirements.txt").read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            found.append(Requirement(text))
    return found


def test_the_platforms_cover_every_glibc_up_to_bookworms() -> None:
    tags = manylinux_platforms("x86_64")
    assert tags[0] == f"manylinux_2_{DEBIAN_BOOKWORM_GLIBC[1]}_x86_64"
    assert "manylinux_2_17_x86_64" in tags and "manylinux2014_x86_64" in tags
    assert all(tag.endswith("_x86_64") for tag in tags)
    # a wheel for a newer glibc than the base's would not load there
    assert "manylinux_2_38_x86_64" not in tags


def test_the_stack_is_what_sandboxfusion_tasks_import() -> None:
    names = {req.name.lower() for req in requirements()}
    assert {"numpy", "pandas", "scipy", "sympy", "scikit-learn", "matplotlib"} <= names
    numpy = next(req for req in requirements() if req.name == "numpy")
    assert not numpy.specifier.contains("2.0.0"), "code-RL data uses numpy 1.x's API"


def test_it_is_built_after_the_sandbox_it_extends() -> None:
    targets = list(builder.DEFAULT_TARGETS)
    assert targets.index("sandbox") < targets.index("sandbox-sci")
    assert builder.IMAGES["sandbox-sci"] == "proctor/sandbox-python-sci:latest"
    dockerfile = (HERE / "Dockerfile").read_text()
    assert f"ARG BASE_IMAGE={builder.SANDBOX}" in dockerfile
    # the stage the builder prunes carries the label it prunes by
    assert f"LABEL {builder.STAGE_LABEL}=sandbox-python-sci" in dockerfile


def test_blas_thread_pools_are_pinned() -> None:
    dockerfile = (HERE / "Dockerfile").read_text()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        assert f"{variable}=1" in dockerfile
