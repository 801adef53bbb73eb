"""npm packages for a language image, installed on the host from the npm registry.

A family with a directory `images/sandbox-lang/npm/<family>/` (package.json, its
package-lock.json, any config its runner reads) gets that directory with its `node_modules`
as `/opt/proctor/<family>/`: the host's npm installs exactly what the lock file says
(`npm ci`, install scripts off, so no package downloads a browser or a binary of its own),
and the image build copies the result in with no network. The packages are plain
JavaScript, so the host's Node.js and the image's need not be the same version.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

from proctor.imagebuild.config import BuildConfig, ImageBuildError
from proctor.imagebuild.wheels import fresh, tail

logger = logging.getLogger(__name__)


def source(config: BuildConfig, family: str) -> Path:
    return config.images_dir / "sandbox-lang" / "npm" / family


def manifest(config: BuildConfig, family: str) -> list[Path]:
    """The family's npm files, sorted (hashed into its recipe); none: it has no npm packages."""
    here = source(config, family)
    if not here.is_dir():
        return []
    return sorted(path for path in here.iterdir() if path.is_file())


def install(config: BuildConfig, family: str, dest: Path) -> None:
    """`npm ci` of the family's lock file into `dest` (emptied first)."""
    npm = shutil.which("npm")
    if npm is None:
        raise ImageBuildError(
            f"npm is needed to build the {family} image (scripts/setup.sh installs it)"
        )
    fresh(dest)
    for path in manifest(config, family):
        shutil.copy2(path, dest / path.name)
    log = config.run_dir / f"npm-{family}.log"
    command = [npm, "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"]
    with log.open("w") as out:
        done = subprocess.run(command, cwd=dest, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise ImageBuildError(f"npm ci for {family} failed (log: .run/{log.name})", tail(log))
    logger.info("%s: npm packages installed from %s", family, dest.name)
