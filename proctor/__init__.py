"""Proctor: a sandboxed code-execution reward service for RL on code.

This package is the user-facing side: the wire models, the typed HTTP client and the CLI.
"""

from proctor.client import AsyncClient, Client
from proctor.env import AsyncEnv, Env

__all__ = ["AsyncClient", "AsyncEnv", "Client", "Env"]
