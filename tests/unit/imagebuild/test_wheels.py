"""The wheel check names what is missing from the wheels' metadata, not pip's error text;
the build's knobs are read once, with build.sh's defaults."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from proctor.imagebuild import pins
from proctor.imagebuild.config import BuildConfig, ImageBuildError
from proctor.imagebuild.wheels import WHEELCHECK

ROOT = Path(__file__).resolve().parents[3]


def wheel(directory: Path, name: str, version: str, requires: list[str]) -> None:
    dist = f"{name}-{version}"
    metadata = "".join(f"Requires-Dist: {req}\n" for req in requires)
    with zipfile.ZipFile(directory / f"{dist}-py3-none-any.whl", "w") as archive:
        archive.writestr(
            f"{dist}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}",
        )
        archive.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        archive.writestr(f"{dist}.dist-info/RECORD", "")


def check(directory: Path) -> dict[str, object]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(directory, arcname=".")
    # this host's pip stands in for the base's; its config may add find-links of its own
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}
    done = subprocess.run(
        [sys.executable, "-c", WHEELCHECK.read_text()],
        input=buffer.getvalue(),
        capture_output=True,
        env=env,
        check=True,
    )
    verdict: dict[str, object] = json.loads(done.stdout)
    return verdict


def test_missing_follows_markers_and_extras_of_the_wheels(tmp_path: Path) -> None:
    wheel(
        tmp_path,
        "pctest_top",
        "1.0",
        [
            "pctest_present>=1",
            "pctest_absent>=2; python_version >= '3'",
            "pctest_never; python_version < '3'",
            "pctest_extra_dep; extra == 'server'",
        ],
    )
    wheel(tmp_path, "pctest_present", "1.5", ["pctest_absent<9"])
    (tmp_path / "requirements.txt").write_text("pctest_top[server]\n")
    verdict = check(tmp_path)
    missing = verdict["missing"]
    assert verdict["complete"] is False and isinstance(missing, list)
    assert sorted(missing) == ["pctest-absent<9,>=2", "pctest-extra-dep"]


def test_a_complete_set_is_complete(tmp_path: Path) -> None:
    wheel(tmp_path, "pctest_top", "1.0", ["pctest_present>=1"])
    wheel(tmp_path, "pctest_present", "1.5", [])
    (tmp_path / "requirements.txt").write_text("pctest_top\n")
    assert check(tmp_path) == {"complete": True}


def test_the_knobs_default_as_build_sh_did(tmp_path: Path) -> None:
    config = BuildConfig.from_env({"HOME": str(tmp_path)}, repo=ROOT)
    assert config.base_image == "python:3.12-slim"
    assert config.service_base_image == f"python:{config.host_python}-slim-bookworm"
    assert config.redis_base_image == "redis:7-bookworm"
    assert config.sandbox_packages == "pytest>=8"
    assert config.pull_timeout_s == 20
    assert config.wheel_cache == tmp_path / ".cache" / "proctor-wheels"
    assert config.pip == (str(ROOT / ".venv" / "bin" / "python"), "-m", "pip")
    assert config.host_python == f"{sys.version_info[0]}.{sys.version_info[1]}"

    told = BuildConfig.from_env(
        {
            "PIP": f"{sys.executable} -m pip",
            "PULL_TIMEOUT": "3",
            "BASE_IMAGE": "proctor/base:bookworm",
        },
        repo=ROOT,
    )
    assert told.pip == (sys.executable, "-m", "pip")
    assert (told.pull_timeout_s, told.base_image) == (3, "proctor/base:bookworm")
    with pytest.raises(ImageBuildError, match="PULL_TIMEOUT"):
        BuildConfig.from_env({"PULL_TIMEOUT": "soon"}, repo=ROOT)


def test_judge_sh_reads_the_pins_of_the_image_build() -> None:
    script = ROOT / "scripts" / "judge.sh"
    # the part of judge.sh that reads them, run on its own
    text = script.read_text()
    start = text.index("read -r LLAMA_VERSION")
    end = text.index("readonly LLAMA_VERSION")
    snippet = (
        f"repo={ROOT}; py={sys.executable}; die() {{ exit 1; }}\n{text[start:end]}"
        'echo "$LLAMA_VERSION $SMOLLM_VERSION $MODEL_ALIAS"'
    )
    done = subprocess.run(["bash", "-c", snippet], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [pins.LLAMA_VERSION, pins.SMOLLM_VERSION, pins.MODEL_ALIAS]
