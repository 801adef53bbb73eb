"""Proctor's images, built from this checkout with or without a registry (`proctor images build`).

    images      sandbox  proctor/sandbox-python:latest  the sandbox runtime for Python tasks
                sandbox-sci  proctor/sandbox-python-sci:latest  ... plus numpy, pandas, scipy
                sandbox-cpp, -java, -go, -node, -rust  proctor/sandbox-<family>:latest: the
                         Python sandbox plus a language family's Debian packages
                service  proctor/service:latest         the API and the worker (one image)
                redis    proctor/redis:latest           Redis for the compose stack
                judge    proctor/judge:latest           the local llama.cpp judge (on request)

    config      BuildConfig: the environment's knobs, read once (docs/configuration.md)
    recipes     what each image is built from, hashed: an unchanged recipe is not rebuilt
    builder     the base (local, pulled, or the offline Debian base) and the builds
    wheels      Python wheels and Debian .deb files made on the host: no container here
                reaches a package archive
    engine      the `docker` CLI, its only caller
    pins        the local judge's versions, shared with scripts/judge.sh
    assets/     run inside a base image, never imported here

Errors: every failed step raises ImageBuildError (its `detail`: the tail of the step's log).
Standard library only, so the client install can build images too.
"""

from __future__ import annotations

from proctor.imagebuild.builder import DEFAULT_TARGETS, IMAGES, build
from proctor.imagebuild.config import BuildConfig, ImageBuildError

__all__ = ["DEFAULT_TARGETS", "IMAGES", "BuildConfig", "ImageBuildError", "build"]
