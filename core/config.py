"""Deployment settings, read once from `PROCTOR_*` environment variables and then frozen.

One object configures the whole server side (API and workers), so a deployment is
described by one table of variables (see the README).
"""

from __future__ import annotations

import hashlib
import socket
from functools import lru_cache
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _split_mapping(value: object) -> object:
    """`python=proctor/sandbox-python:latest,node=...` → dict."""
    if isinstance(value, str):
        pairs = (item.split("=", 1) for item in value.split(",") if item.strip())
        return {name.strip(): image.strip() for name, image in pairs}
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROCTOR_", frozen=True, extra="ignore")

    # --- where things are
    redis_url: str = "redis://127.0.0.1:6379/0"
    host: str = "127.0.0.1"
    port: int = 8000
    host_id: str = Field(default_factory=socket.gethostname, description="worker host identity")
    deployment: str | None = Field(
        None, description="names this deployment's containers; defaults to one from its Redis"
    )

    # --- API
    api_tokens: Annotated[list[str], NoDecode] = Field(default_factory=list)
    max_body_bytes: int = 32 * 1024 * 1024
    max_wait_s: float = 300.0
    max_queue_depth: int = 10_000
    max_batch: int = 1_000
    result_ttl_s: int = 24 * 3600
    dedup_ttl_s: int = Field(600, description="identical one-shot requests share an episode")

    # --- sandboxes
    images: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=lambda: {"python": "proctor/sandbox-python:latest"}
    )
    runtime: str | None = Field(None, description="OCI runtime, e.g. runsc for gVisor")
    sandbox_user: str = "1000:1000"
    pool_size: int = Field(2, ge=0, le=64, description="warm containers per image per worker")
    network: Literal["auto", "none"] = "auto"
    honeypot_network: str = "proctor-sandbox"
    honeypot_image: str | None = Field(None, description="defaults to the python sandbox image")
    sandbox_subnets: str = Field(
        "10.213.0.0/16", description="each sandbox's own /29 network is carved from here")
    max_episode_s: float = 3600.0
    interactive_idle_s: float = 300.0
    # the most one sandbox may ask for (service/admission.py); unset: derived from the host.
    # Never below the default `Limits`, so a task that leaves its limits unset is admitted.
    max_memory_mb: int | None = Field(None, ge=512, description="unset: half the host's memory")
    max_cpus: float | None = Field(None, ge=1, description="unset: the host's CPU count")
    max_pids: int = Field(1024, ge=128)
    max_disk_mb: int | None = Field(None, ge=256, description="unset: a quarter of the memory")
    max_output_bytes: int = Field(16 * 1024 * 1024, ge=65_536)

    # --- workers
    worker_concurrency: int = Field(2, ge=1, le=64)
    heartbeat_s: float = 2.0
    heartbeat_ttl_s: float = 30.0
    reaper_interval_s: float = 10.0

    @property
    def deployment_id(self) -> str:
        """Names this deployment on a Docker engine that others may share: the setting,
        else the Redis it uses (host, port, database; not the password, which may change)."""
        if self.deployment:
            return self.deployment
        url = urlsplit(self.redis_url)
        where = f"{url.hostname}:{url.port or 6379}{url.path or '/0'}"
        return hashlib.sha256(where.encode()).hexdigest()[:12]

    _csv = field_validator("api_tokens", mode="before")(_split_csv)
    _map = field_validator("images", mode="before")(_split_mapping)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
