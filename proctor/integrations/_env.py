"""Where the trainer-side adapters find the service: an explicit argument, else the
trainer's environment. The one place on the client side that reads it.

    PROCTOR_URL         the service (default: the client's `DEFAULT_URL`)
    PROCTOR_TOKEN       its bearer token (default: none)
    PROCTOR_TASKS_FILE  the task catalog task-id labels are looked up in (default: none)

Read at each call, not at import: a trainer may set them after importing us.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from proctor.client import DEFAULT_URL

URL_VARIABLE = "PROCTOR_URL"
TOKEN_VARIABLE = "PROCTOR_TOKEN"
TASKS_FILE_VARIABLE = "PROCTOR_TASKS_FILE"


@dataclass(frozen=True, slots=True)
class Service:
    url: str
    token: str | None


def service(url: str | None = None, token: str | None = None) -> Service:
    """The service to call: `url` and `token` where given, else the environment's."""
    return Service(
        url=url or os.environ.get(URL_VARIABLE) or DEFAULT_URL,
        token=token or os.environ.get(TOKEN_VARIABLE) or None,
    )


def tasks_file(path: str | None = None) -> str | None:
    """The task catalog's path: `path` where given, else the environment's; None: none."""
    return path or os.environ.get(TASKS_FILE_VARIABLE) or None
