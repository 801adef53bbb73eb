"""Task images by reference: what `task.image` may name beside the deployment's image names.

A reference is Docker's `[host[:port]/]path[:tag][@sha256:hex]`, nothing more: no scheme,
no credentials (the engine's own auth config holds those), a digest of the one algorithm the
registries serve and of its exact length. A deployment allows references by glob patterns
(`PROCTOR_IMAGE_ALLOW`); none by default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

MAX_LENGTH = 512

# Docker's reference grammar (distribution/reference), lowercase path components
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_HOST = rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-fA-F:]+\])(?::[0-9]{{1,5}})?"
_TAG = r"[\w][\w.-]{0,127}"
_REFERENCE = re.compile(
    rf"^(?:(?P<host>{_HOST})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>[^@]+))?$"
)
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class BadReference(ValueError):
    """Not an image reference this service takes (the message says why)."""


def is_reference(image: str) -> bool:
    """Whether `task.image` names an image by reference rather than by the deployment's
    name for it: a reference has a path separator, a tag or a digest; names have none."""
    return any(c in image for c in "/:@")


def check_reference(image: str) -> str:
    """`image` when it is a well-formed reference; BadReference saying what is wrong."""
    if len(image) > MAX_LENGTH:
        raise BadReference(f"an image reference is at most {MAX_LENGTH} characters")
    if "://" in image:
        raise BadReference("an image reference has no scheme (write host:port/repo:tag)")
    before_path = image.split("/", 1)[0]
    if "@" in before_path and "/" in image:
        raise BadReference("an image reference carries no credentials (the engine holds them)")
    match = _REFERENCE.match(image)
    if match is None:
        raise BadReference(
            f"{image!r} is not an image reference (host:port/repo:tag or host:port/repo@sha256:…)"
        )
    digest = match["digest"]
    if digest is not None and not _DIGEST.match(digest):
        raise BadReference(f"malformed digest {digest!r}: sha256: and 64 lowercase hex digits")
    return image


def allowed(image: str, patterns: Iterable[str]) -> bool:
    """Whether a reference matches one of the deployment's glob patterns (`*` spans `/`)."""
    return any(fnmatchcase(image, pattern) for pattern in patterns)


def digest_of(image: str) -> str | None:
    """The digest a reference pins, if it pins one."""
    _, at, digest = image.partition("@")
    return digest if at else None
