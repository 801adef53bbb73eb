"""npm packages for a language image, installed on the host from the npm registry.

The build itself reaches no registry (it runs with `--network none` on the offline base):
the host's npm installs the packages into the build's context, install scripts off (no
package downloads a browser or a binary of its own; esbuild, tsx's, ships its binary for
the host's platform, the sandbox's too, as a package), and the image copies the result in.
Two ways, one per need:

- `install_global`: a family's pinned packages (the node family's tsx and the libraries of
  SandboxFusion's node runtime) into `node_modules`, which the image puts on `NODE_PATH`.
- `install`: a family with a directory `images/sandbox-lang/npm/<family>/` (package.json,
  its package-lock.json, any config its runner reads) gets that directory with its
  `node_modules` as `/opt/proctor/<family>/`: `npm ci`, exactly what the lock file says.

The packages are plain JavaScript, so the host's Node.js and the image's need not be the
same version.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from proctor.imagebuild.config import BuildConfig, ImageBuildError
from proctor.imagebuild.wheels import fresh, tail

logger = logging.getLogger(__name__)

_QUIET = ("--no-audit", "--no-fund", "--omit=dev", "--ignore-scripts")


def source(config: BuildConfig, family: str) -> Path:
    return config.images_dir / "sandbox-lang" / "npm" / family


def manifest(config: BuildConfig, family: str) -> list[Path]:
    """The family's npm files, sorted (hashed into its recipe); none: it has no npm packages."""
    here = source(config, family)
    if not here.is_dir():
        return []
    return sorted(path for path in here.iterdir() if path.is_file())


def _npm(config: BuildConfig, what: str, args: Sequence[str], cwd: Path, log_name: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ImageBuildError(f"npm is needed to build {what} (scripts/setup.sh installs it)")
    log = config.run_dir / log_name
    with log.open("w") as out:
        done = subprocess.run(
            [npm, *args, *_QUIET], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    if done.returncode != 0:
        raise ImageBuildError(f"npm {args[0]} for {what} failed (log: .run/{log.name})", tail(log))


def install(config: BuildConfig, family: str, dest: Path) -> None:
    """`npm ci` of the family's lock file into `dest` (emptied first)."""
    fresh(dest)
    for path in manifest(config, family):
        shutil.copy2(path, dest / path.name)
    _npm(config, f"the {family} image", ["ci"], dest, f"npm-{family}.log")
    logger.info("%s: npm packages installed from %s", family, dest.name)


def install_global(config: BuildConfig, dest: Path, packages: Sequence[str]) -> int:
    """`npm install` of the pinned `packages` into `dest/node_modules` (`dest` emptied first;
    left empty when there are none). Returns the number of packages installed."""
    fresh(dest)
    if not packages:
        return 0
    args = ["install", "--prefix", str(dest), "--no-save", "--no-package-lock", *packages]
    _npm(config, " ".join(packages), args, dest, f"npm-install-{dest.name}.log")
    installed = [p for p in (dest / "node_modules").iterdir() if not p.name.startswith(".")]
    return sum(len(list(p.iterdir())) if p.name.startswith("@") else 1 for p in installed)
