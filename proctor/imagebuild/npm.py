"""npm packages for a language image, installed on the host into the build's context.

The build itself reaches no registry (it runs with `--network none` on the offline base):
the host's `npm` installs the pinned packages into a scratch prefix, and the image copies
that `node_modules` tree as it is. What is installed is plain JavaScript plus, for tsx,
esbuild's static binary for the host's platform, which is the sandbox's platform too.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from proctor.imagebuild.config import BuildConfig, ImageBuildError
from proctor.imagebuild.wheels import tail


def install(config: BuildConfig, dest: Path, packages: Sequence[str]) -> int:
    """`npm install` of the pinned `packages` into `dest/node_modules` (emptied first); an
    empty `dest` when there are none. Returns the number of packages installed."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if not packages:
        return 0
    npm = shutil.which("npm")
    if npm is None:
        raise ImageBuildError(
            f"npm is needed to fetch {' '.join(packages)} for the node image; "
            "install it (apt-get install npm)"
        )
    log = config.run_dir / f"npm-install-{dest.name}.log"
    command = [
        npm,
        "install",
        "--prefix",
        str(dest),
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--no-package-lock",
        "--omit=dev",
        "--ignore-scripts",  # esbuild ships its binary as a package; nothing needs a script
        *packages,
    ]
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise ImageBuildError(
            f"npm install of {' '.join(packages)} failed (log: .run/{log.name})", tail(log)
        )
    installed = [p for p in (dest / "node_modules").iterdir() if not p.name.startswith(".")]
    return sum(len(list(p.iterdir())) if p.name.startswith("@") else 1 for p in installed)
