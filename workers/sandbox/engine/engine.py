"""`Engine`: one per process, a Docker client plus the calls sandboxes need, made of its
parts (one module each, see workers/sandbox/engine/__init__.py)."""

from __future__ import annotations

from workers.sandbox.engine.containers import Containers
from workers.sandbox.engine.execs import Execs
from workers.sandbox.engine.services import Services


class Engine(Containers, Services, Execs):
    """One per process: a Docker client plus the calls sandboxes need."""
