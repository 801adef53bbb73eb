"""Build Proctor's images, with or without a registry; keep each one whose recipe held.

An image is kept when its `org.proctor.recipe` label matches the current recipe and the base
it was built from has not been rebuilt since (`org.proctor.base.id`): a changed Dockerfile,
source or re-bootstrapped base rebuilds by itself. A base that is neither local nor
pullable within PULL_TIMEOUT is replaced by the offline base, bootstrapped from the host's
Debian mirror if absent, and such builds run with `--network none`; after one failed pull
no other base is tried in the same run.
"""

from __future__ import annotations

import fcntl
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

# modules by their full name: `from proctor.imagebuild import x` would go through the
# package's __init__, which imports this module
import proctor.imagebuild.engine as engine
import proctor.imagebuild.headers as headers
import proctor.imagebuild.npm as npm
import proctor.imagebuild.pins as pins
import proctor.imagebuild.recipes as recipes
import proctor.imagebuild.wheels as wheels
from proctor.imagebuild.config import OFFLINE_BASE, BuildConfig, ImageBuildError

logger = logging.getLogger(__name__)

SANDBOX = "proctor/sandbox-python:latest"
SANDBOX_SCI = "proctor/sandbox-python-sci:latest"
SERVICE = "proctor/service:latest"
REDIS = "proctor/redis:latest"
JUDGE = "proctor/judge:latest"
# One sandbox per language family (core/languages.py says which language runs in which):
# target → (image, the Debian packages it adds to the Python sandbox).
LANGUAGE_IMAGES = {
    "sandbox-cpp": ("proctor/sandbox-cpp:latest", ("g++", "gcc", "libc6-dev")),
    # javatuples: SandboxFusion's java runner puts it on the class path
    "sandbox-java": (
        "proctor/sandbox-java:latest",
        ("openjdk-17-jdk-headless", "junit5", "libjavatuples-java"),
    ),
    # the Go libraries of SandboxFusion's go runtime that Debian packages as source (its
    # tests import testify): on the GOPATH, so `go build`/`go test` never download
    "sandbox-go": (
        "proctor/sandbox-go:latest",
        (
            "golang-go",
            "golang-github-stretchr-testify-dev",
            "golang-gopkg-yaml.v2-dev",
            "golang-gopkg-yaml.v3-dev",
            "golang-github-sirupsen-logrus-dev",
            "golang-go.uber-atomic-dev",
        ),
    ),
    "sandbox-node": ("proctor/sandbox-node:latest", ("nodejs", "node-typescript")),
    "sandbox-rust": ("proctor/sandbox-rust:latest", ("rustc",)),
    # SandboxFusion's other languages, few families so that builds stay short
    "sandbox-script": (
        "proctor/sandbox-script:latest",
        # ruby, php, perl (with the Test::Deep and Data::Compare SandboxFusion installs), lua
        # (with luaunit), sqlite3, and iverilog: small interpreters sharing one image
        (
            "ruby",
            "php-cli",
            "perl",
            "libtest-deep-perl",
            "libdata-compare-perl",
            "lua5.4",
            "lua-unit",
            "sqlite3",
            "iverilog",
        ),
    ),
    "sandbox-mono": ("proctor/sandbox-mono:latest", ("mono-mcs", "mono-runtime")),
    "sandbox-jvm": ("proctor/sandbox-jvm:latest", ("kotlin", "scala")),
    "sandbox-r": ("proctor/sandbox-r:latest", ("r-base-core",)),
    "sandbox-racket": ("proctor/sandbox-racket:latest", ("racket",)),
    "sandbox-d": ("proctor/sandbox-d:latest", ("ldc", "gcc", "libc6-dev")),  # ldc links with cc
    "sandbox-jest": ("proctor/sandbox-jest:latest", ()),
}
# target → npm packages, pinned, installed by the host's npm (proctor/imagebuild/npm.py):
# tsx runs TypeScript as SandboxFusion does (esbuild: types stripped, ES module interop);
# the rest are the libraries of SandboxFusion's node runtime that programs import (its jest,
# jsdom and puppeteer serve other runners)
NPM_PACKAGES = {
    "sandbox-node": (
        "tsx@4.7.1",
        "lodash@4.17.21",
        "js-md5@0.7.3",
        "seedrandom@3.0.5",
        "random-seed@0.3.0",
        "commander@12.1.0",
    ),
}
# what a family's image has beyond its Debian packages (part of its recipe)
EXTRAS = {"cpp": (f"testlib.h {headers.TESTLIB_SHA256}",)}
# A family built on another family's image instead of the Python sandbox: kotlin and scala
# run on the java image's JDK, jest on the node image's node.
LANGUAGE_BASES = {"sandbox-jvm": "sandbox-java", "sandbox-jest": "sandbox-node"}
# target name → image; the judge is built on request only (it compiles llama.cpp once)
IMAGES = {
    "sandbox": SANDBOX,
    "sandbox-sci": SANDBOX_SCI,
    **{target: image for target, (image, _) in LANGUAGE_IMAGES.items()},
    "service": SERVICE,
    "redis": REDIS,
    "judge": JUDGE,
}
DEFAULT_TARGETS = ("sandbox", "sandbox-sci", *LANGUAGE_IMAGES, "service", "redis")

RECIPE_LABEL = "org.proctor.recipe"
BASE_LABEL = "org.proctor.base"  # set by each Dockerfile from its BASE_IMAGE
BASE_ID_LABEL = "org.proctor.base.id"
STAGE_LABEL = "org.proctor.stage"  # on a build stage's image, removed after the build


@dataclass(frozen=True)
class Base:
    """What to build FROM, and whether the build may use the network."""

    image: str
    network: str  # "default" or "none"


class Builder:
    """One run: the registry's state is learnt once and kept for the rest of it."""

    def __init__(self, config: BuildConfig, *, force: bool) -> None:
        self.config = config
        self.force = force
        self.registry_down = False

    # ------------------------------------------------------------------ steps

    def up_to_date(self, image: str, recipe: str) -> bool:
        """Same recipe, and its base not rebuilt since (a base no longer present locally
        does not force a rebuild: there is nothing to rebuild from)."""
        if self.force or engine.label(image, RECIPE_LABEL) != recipe:
            return False
        base_id = engine.image_id(engine.label(image, BASE_LABEL))
        if base_id is None or base_id == engine.label(image, BASE_ID_LABEL):
            logger.info("%s up to date (%s)", image, engine.image_id(image))
            return True
        return False

    def resolve_base(self, wanted: str) -> Base:
        if engine.image_id(wanted) is not None:
            return Base(wanted, "default")
        if wanted != OFFLINE_BASE and not self.registry_down:
            logger.info("pulling %s (timeout %g s)", wanted, self.config.pull_timeout_s)
            if engine.pull(wanted, self.config.pull_timeout_s):
                return Base(wanted, "default")
            self.registry_down = True
            logger.info(
                "%s unavailable (no registry?); using offline base %s", wanted, OFFLINE_BASE
            )
        elif wanted != OFFLINE_BASE:
            logger.info("no registry this run: %s instead of %s", OFFLINE_BASE, wanted)
        if engine.image_id(OFFLINE_BASE) is None:
            bootstrap = self.config.images_dir / "base" / "bootstrap.sh"
            # debootstrap's progress on stderr: stdout carries this build's own lines
            done = subprocess.run(
                [str(bootstrap)],
                env={**os.environ, "BASE_TAG": OFFLINE_BASE},
                stdout=sys.stderr,
                check=False,
            )
            if done.returncode != 0:
                raise ImageBuildError(f"images/base/bootstrap.sh failed (exit {done.returncode})")
        return Base(OFFLINE_BASE, "none")

    def check_python(self, base: Base) -> None:
        """The service and judge wheels are built for the host's Python: the base's must match."""
        have = engine.python_version(base.image)
        if have is None:
            raise ImageBuildError(f"{base.image} has no python3")
        want = self.config.host_python
        if have != want:
            raise ImageBuildError(
                f"{base.image} has Python {have} but the wheels are built with the host's "
                f"{want}: set PIP to a Python {have} pip, or SERVICE_BASE_IMAGE to a Python "
                f"{want} base"
            )

    def docker_build(
        self,
        image: str,
        dockerfile: str,
        recipe: str,
        base: Base,
        context: Sequence[tuple[str, str]],
        build_args: dict[str, str] | None = None,
    ) -> None:
        """Build from a context of (path under images/, name in the context); keep the log
        in .run/, drop the image this one replaced."""
        previous = engine.image_id(image)
        name = image.split("/", 1)[-1].split(":", 1)[0]
        log = self.config.run_dir / f"image-build-{name}.log"
        logger.info("building %s FROM %s (network: %s)", image, base.image, base.network)
        started = time.monotonic()
        images = self.config.images_dir
        ok = engine.build(
            image=image,
            dockerfile=dockerfile,
            network=base.network,
            no_cache=self.force,
            context=[(images / path, arcname) for path, arcname in context],
            build_args={"BASE_IMAGE": base.image, **(build_args or {})},
            labels={RECIPE_LABEL: recipe, BASE_ID_LABEL: engine.image_id(base.image) or ""},
            log=log,
        )
        if not ok:
            raise ImageBuildError(
                f"docker build of {image} failed (log: .run/{log.name})", wheels.tail(log, 25)
            )
        built = engine.image_id(image) or ""
        if previous is not None and previous != built:
            engine.remove(previous)
        logger.info(
            "%s %s %d MB (built in %d s)",
            image,
            built,
            engine.size_bytes(image) // 1_000_000,
            time.monotonic() - started,
        )

    # ------------------------------------------------------------------ images

    def sandbox(self) -> None:
        config = self.config
        recipe = recipes.simple(
            config.images_dir / "sandbox-python" / "Dockerfile",
            config.base_image,
            config.sandbox_packages,
        )
        if self.up_to_date(SANDBOX, recipe):
            return
        base = self.resolve_base(config.base_image)
        wheels.sandbox(config)
        # the Dockerfile copies .wheels/: the sandbox's own wheels go in under that name
        self.docker_build(
            SANDBOX,
            "sandbox-python/Dockerfile",
            recipe,
            base,
            [
                ("sandbox-python/Dockerfile", "sandbox-python/Dockerfile"),
                (".wheels/sandbox", ".wheels"),
            ],
        )

    def sandbox_sci(self) -> None:
        """The Python sandbox plus the scientific stack, built on top of it (shared layers);
        nothing is fetched in the build, so it runs with no network."""
        config = self.config
        here = config.images_dir / "sandbox-python-sci"
        recipe = recipes.simple(here / "Dockerfile", (here / "requirements.txt").read_text())
        self.sandbox()
        if self.up_to_date(SANDBOX_SCI, recipe):
            return
        base = Base(SANDBOX, "none")
        python = engine.python_version(SANDBOX)
        if python is None:
            raise ImageBuildError(f"{SANDBOX} has no python3")
        dest = wheels.scientific(config, here / "requirements.txt", python, platform.machine())
        wheels.complete_for(config, SANDBOX, dest, config.run_dir / "sandbox-sci-wheels.log")
        self.docker_build(
            SANDBOX_SCI,
            "sandbox-python-sci/Dockerfile",
            recipe,
            base,
            [
                ("sandbox-python-sci/Dockerfile", "sandbox-python-sci/Dockerfile"),
                (".wheels/sandbox-sci", ".wheels"),
            ],
        )
        engine.prune_stage(f"{STAGE_LABEL}=sandbox-python-sci")

    def language(self, target: str) -> None:
        """A language family's sandbox: the Python sandbox (or another family's image) plus
        Debian packages and npm packages, smoke-tested."""
        config = self.config
        image, packages = LANGUAGE_IMAGES[target]
        node_packages = NPM_PACKAGES.get(target, ())
        family = target.removeprefix("sandbox-")
        on_family = LANGUAGE_BASES.get(target)
        wanted_base = LANGUAGE_IMAGES[on_family][0] if on_family else config.language_base_image
        npm_manifest = npm.manifest(config, family)
        dockerfile = (
            config.images_dir
            / "sandbox-lang"
            / ("npm.Dockerfile" if npm_manifest else "Dockerfile")
        )
        smoke = f"sandbox-lang/smoke/{family}.sh"
        recipe = recipes.digest(
            [
                dockerfile.read_bytes(),
                (config.images_dir / smoke).read_bytes(),
                *(path.read_bytes() for path in npm_manifest),
                recipes.lines(wanted_base, *packages, *EXTRAS.get(family, ())),
                *([recipes.lines(*node_packages)] if node_packages else []),
            ]
        )
        if on_family:
            self.language(on_family)  # its base first (kept when up to date)
        elif config.language_base_image == SANDBOX and engine.image_id(SANDBOX) is None:
            self.sandbox()  # built on its own first (the "sandbox" target) when all are built
        if self.up_to_date(image, recipe):
            return
        base = self.resolve_base(wanted_base)
        context = [
            (f"sandbox-lang/{dockerfile.name}", f"sandbox-lang/{dockerfile.name}"),
            (smoke, "smoke.sh"),
        ]
        if npm_manifest:
            npm.install(config, family, config.wheels_dir / "npm" / family)
            context.append((f".wheels/npm/{family}", "npm"))
        else:
            dest = config.wheels_dir / "debs" / family
            count = wheels.deb_closure(config, base.image, dest, packages)
            logger.info("%s: %d Debian packages for %s", image, count, " ".join(packages))
            if family == "cpp":  # installed into /usr/local/include by the Dockerfile
                headers.testlib(config, dest / "include")
            context.append((f".wheels/debs/{family}", ".debs"))
            count = npm.install_global(config, config.wheels_dir / "npm" / family, node_packages)
            if node_packages:
                logger.info("%s: %d npm packages for %s", image, count, " ".join(node_packages))
            context.append((f".wheels/npm/{family}", ".npm"))
        self.docker_build(
            image,
            f"sandbox-lang/{dockerfile.name}",
            recipe,
            # the packages are in the context: the build needs no network
            Base(base.image, "none"),
            context,
            build_args={"FAMILY": family},
        )

    def service(self) -> None:
        config = self.config
        dockerfile = config.images_dir / "service" / "Dockerfile"
        files = recipes.source_files(config.repo)
        recipe = recipes.service(
            dockerfile,
            config.service_base_image,
            recipes.source_digest(config.repo, files),
            wheels.constraints(config),
        )
        if self.up_to_date(SERVICE, recipe):
            return
        base = self.resolve_base(config.service_base_image)
        self.check_python(base)
        dest = wheels.service(config, files)
        wheels.complete_for(config, base.image, dest, config.run_dir / "service-wheels.log")
        self.docker_build(
            SERVICE,
            "service/Dockerfile",
            recipe,
            base,
            [("service/Dockerfile", "service/Dockerfile"), (".wheels/service", ".wheels/service")],
        )

    def redis(self) -> None:
        config = self.config
        recipe = recipes.simple(
            config.images_dir / "service" / "redis.Dockerfile", config.redis_base_image
        )
        if self.up_to_date(REDIS, recipe):
            return
        base = self.resolve_base(config.redis_base_image)
        dest = config.wheels_dir / "debs" / "redis"
        if base.image == OFFLINE_BASE:
            # redis-tools holds the server binary; the libraries are what minbase lacks
            wheels.debs(
                config,
                dest,
                ["redis-server", "redis-tools", "libjemalloc2", "liblzf1", "libatomic1"],
            )
        else:
            wheels.fresh(dest)
        self.docker_build(
            REDIS,
            "service/redis.Dockerfile",
            recipe,
            base,
            [
                ("service/redis.Dockerfile", "service/redis.Dockerfile"),
                (".wheels/debs/redis", ".wheels/debs/redis"),
            ],
        )

    def judge(self) -> None:
        config = self.config
        llama, smollm = pins.LLAMA_VERSION, pins.SMOLLM_VERSION
        recipe = recipes.simple(
            config.images_dir / "service" / "judge.Dockerfile",
            config.service_base_image,
            f"{llama} {smollm}",
        )
        if self.up_to_date(JUDGE, recipe):
            return
        base = self.resolve_base(config.service_base_image)
        self.check_python(base)
        dest = wheels.judge(config, llama, smollm)
        wheels.complete_for(config, base.image, dest, config.run_dir / "judge-wheels.log")
        wheels.debs(config, config.wheels_dir / "debs" / "judge", ["libgomp1"])
        self.docker_build(
            JUDGE,
            "service/judge.Dockerfile",
            recipe,
            base,
            [
                ("service/judge.Dockerfile", "service/judge.Dockerfile"),
                (".wheels/judge", ".wheels/judge"),
                (".wheels/debs/judge", ".wheels/debs/judge"),
            ],
        )


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Concurrent builds (two setup runs) wait for each other instead of racing."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def build(
    targets: Sequence[str] = DEFAULT_TARGETS,
    *,
    force: bool = False,
    config: BuildConfig | None = None,
) -> None:
    """Build the named images (see IMAGES) in order; raise ImageBuildError on the first
    that fails. With `force`, rebuild without the layer cache even when up to date (the
    offline base is kept: images/base/bootstrap.sh rebuilds it)."""
    unknown = [target for target in targets if target not in IMAGES]
    if unknown:
        raise ValueError(f"unknown images {unknown}; known: {', '.join(IMAGES)}")
    engine.require_docker()
    config = config or BuildConfig.from_env()
    builder = Builder(config, force=force)
    steps: dict[str, Callable[[], None]] = {
        "sandbox": builder.sandbox,
        "sandbox-sci": builder.sandbox_sci,
        **{target: partial(builder.language, target) for target in LANGUAGE_IMAGES},
        "service": builder.service,
        "redis": builder.redis,
        "judge": builder.judge,
    }
    with _exclusive(config.run_dir / "images.lock"):
        for target in targets:
            steps[target]()
