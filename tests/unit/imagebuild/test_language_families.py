"""Language families: each has its smoke script, a family built on another is built after it,
and jest's npm packages come from a lock file that names no download address."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.imagebuild import npm
from proctor.imagebuild.builder import DEFAULT_TARGETS, LANGUAGE_BASES, LANGUAGE_IMAGES
from proctor.imagebuild.config import BuildConfig

ROOT = Path(__file__).resolve().parents[3]


def test_every_family_has_a_smoke_script_and_something_to_install() -> None:
    config = BuildConfig.from_env({}, repo=ROOT)
    for target, (_, packages) in LANGUAGE_IMAGES.items():
        family = target.removeprefix("sandbox-")
        assert (ROOT / "images" / "sandbox-lang" / "smoke" / f"{family}.sh").is_file(), family
        assert packages or npm.manifest(config, family), family


def test_a_family_on_another_family_is_built_after_it() -> None:
    for target, base in LANGUAGE_BASES.items():
        assert target in LANGUAGE_IMAGES and base in LANGUAGE_IMAGES
        assert base not in LANGUAGE_BASES  # one level: the base is built on the Python sandbox
        assert DEFAULT_TARGETS.index(base) < DEFAULT_TARGETS.index(target)


def test_jest_installs_from_a_lock_file_without_download_addresses() -> None:
    config = BuildConfig.from_env({}, repo=ROOT)
    names = [path.name for path in npm.manifest(config, "jest")]
    assert names == ["babel.config.js", "package-lock.json", "package.json"]
    lock = json.loads((npm.source(config, "jest") / "package-lock.json").read_text())
    packages = lock["packages"]
    assert "node_modules/jest" in packages and "node_modules/lodash" in packages
    assert not any("resolved" in entry for entry in packages.values())
    assert npm.manifest(config, "cpp") == []  # no npm directory: Debian packages only
