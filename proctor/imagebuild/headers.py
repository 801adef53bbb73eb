"""testlib.h for the C++ sandbox: the checkers of code-contest tasks include it.

testlib (Mike Mirzayanov's, the checker library of Codeforces and Polygon) is one header
that no Debian package ships; a PyPI package does: `rbx-cp` (the rbx problem-setting tool)
carries a copy of it. Its wheel is downloaded with the host's pip and the header taken out,
checked against the digest pinned here, into the build context (`/usr/local/include` in the
image).
"""

from __future__ import annotations

import hashlib
import logging
import zipfile
from pathlib import Path

from proctor.imagebuild.config import BuildConfig, ImageBuildError
from proctor.imagebuild.wheels import pip, tail

logger = logging.getLogger(__name__)

TESTLIB_WHEEL = "rbx-cp==2.3.3"
TESTLIB_MEMBER = "rbx/resources/predownloaded/testlib.h"
TESTLIB_VERSION = "0.9.44"  # its `#define VERSION`
TESTLIB_SHA256 = "26facaf1259071eb14ff9e011b6b50473a14ab0e0a8e702087b73cffd1fb1b90"


def testlib(config: BuildConfig, include: Path) -> Path:
    """testlib.h written into `include`; the wheel is kept in the wheel cache."""
    cache = config.wheels_dir / "testlib"
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("rbx_cp-*.whl"))
    if not wheels:
        log = config.run_dir / "testlib-wheel.log"
        done = pip(config, "download", "--no-deps", "-d", str(cache), TESTLIB_WHEEL, log=log)
        wheels = sorted(cache.glob("rbx_cp-*.whl"))
        if done.returncode != 0 or not wheels:
            raise ImageBuildError(f"pip could not download {TESTLIB_WHEEL}", tail(log))
    with zipfile.ZipFile(wheels[-1]) as wheel:
        header = wheel.read(TESTLIB_MEMBER)
    digest = hashlib.sha256(header).hexdigest()
    if digest != TESTLIB_SHA256:
        raise ImageBuildError(f"testlib.h from {wheels[-1].name} has sha256 {digest}")
    include.mkdir(parents=True, exist_ok=True)
    target = include / "testlib.h"
    target.write_bytes(header)
    logger.info("testlib.h %s from %s", TESTLIB_VERSION, wheels[-1].name)
    return target
