"""Deployment settings, read once from `PROCTOR_*` environment variables and then frozen.

One object configures the whole server side (API and workers), so a deployment is
described by one table of variables (docs/configuration.md); every default is named in
core/defaults.py. Each process reads it once, at its entry point (`get_settings`), and
hands it to what needs it: nothing else reads the environment.
"""

from __future__ import annotations

import hashlib
import socket
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from core import defaults


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
    redis_url: str = defaults.REDIS_URL
    host: str = defaults.HOST
    port: int = defaults.PORT
    sandboxfusion_port: int | None = Field(
        None, ge=1, le=65535, description="also serve the API here (SandboxFusion's 8080)"
    )
    host_id: str = Field(default_factory=socket.gethostname, description="worker host identity")
    deployment: str | None = Field(
        None, description="names this deployment's containers; defaults to one from its Redis"
    )
    tasks_file: Path | None = Field(
        None, description="the task catalog that task-id labels are looked up in"
    )

    # --- API
    api_tokens: Annotated[list[str], NoDecode] = Field(default_factory=list)
    max_body_bytes: int = defaults.MAX_BODY_BYTES
    max_wait_s: float = defaults.MAX_WAIT_S
    max_queue_depth: int = defaults.MAX_QUEUE_DEPTH
    max_queue_wait_s: float = Field(
        defaults.MAX_QUEUE_WAIT_S,
        ge=0,
        description="submissions whose estimated wait in the queue is past this get 429; 0: none",
    )
    max_batch: int = defaults.MAX_BATCH
    result_ttl_s: int = defaults.RESULT_TTL_S
    dedup_ttl_s: int = Field(
        defaults.DEDUP_TTL_S, description="identical one-shot requests share an episode"
    )
    repo_ttl_s: int = Field(
        defaults.REPO_TTL_S, gt=0, description="a sealed repository outlives its last use"
    )
    repo_max_mb: int = Field(
        defaults.REPO_MAX_MB, gt=0, description="largest repository upload and sealed copy"
    )
    sink_dir: Path | None = Field(
        None, description="the durable sink's directory (core/sink.py); unset: no sink"
    )
    sink_max_bytes: int = Field(
        defaults.SINK_MAX_BYTES, ge=4096, description="a sink file rotates at this size"
    )

    # --- sandboxes
    images: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=lambda: dict(defaults.IMAGES)
    )
    image_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="glob patterns of the image references `task.image` may name "
        "(e.g. 127.0.0.1:5000/swe/*); empty: none, only the names of `images`",
    )
    pull_timeout_s: float = Field(
        defaults.PULL_TIMEOUT_S, gt=0, description="the longest a task image's pull is waited for"
    )
    image_cache_gb: float = Field(
        defaults.IMAGE_CACHE_GB,
        ge=0,
        description="disk the pulled task images may take per host; least recently used "
        "ones are removed beyond it (never `images`, never one a sandbox uses)",
    )
    runtime: str | None = Field(
        None,
        description="OCI runtime, e.g. runc, or runsc for gVisor; unset: crun where the engine"
        " has it and it runs sandboxes here, else the engine's default",
    )
    sandbox_user: str = defaults.SANDBOX_USER
    pool_size: int = Field(
        defaults.POOL_SIZE,
        ge=0,
        le=64,
        description="at most this many idle started sandboxes per spec per worker process "
        "(fewer when recent demand needs fewer)",
    )
    pool_host_min: int = Field(
        defaults.POOL_HOST_MIN,
        ge=0,
        description="idle sandboxes kept per host of each prewarmed spec, with no demand",
    )
    pool_host_max: int = Field(
        defaults.POOL_HOST_MAX,
        ge=0,
        description="idle and starting sandboxes per host, all specs together",
    )
    isolation: Literal["container", "pooled"] = Field(
        defaults.ISOLATION,
        description="one-shot episodes in a fresh container each, or in pooled sandboxes",
    )
    pooled_episodes: int = Field(
        defaults.POOLED_EPISODES, ge=1, description="episodes a pooled sandbox serves"
    )
    network: Literal["auto", "none"] = defaults.NETWORK
    honeypot_network: str = defaults.HONEYPOT_NETWORK
    honeypot_image: str | None = Field(None, description="defaults to the python sandbox image")
    sandbox_subnets: str = Field(
        defaults.SANDBOX_SUBNETS, description="each sandbox's own /29 network is carved from here"
    )
    max_episode_s: float = defaults.MAX_EPISODE_S
    interactive_idle_s: float = defaults.INTERACTIVE_IDLE_S
    # the most one sandbox may ask for (service/admission.py); unset: derived from the host.
    # Never below the default `Limits`, so a task that leaves its limits unset is admitted.
    max_memory_mb: int | None = Field(None, ge=512, description="unset: half the host's memory")
    max_cpus: float | None = Field(None, ge=1, description="unset: the host's CPU count")
    max_pids: int = Field(defaults.MAX_PIDS, ge=128)
    max_disk_mb: int | None = Field(None, ge=256, description="unset: a quarter of the memory")
    max_output_bytes: int = Field(defaults.MAX_OUTPUT_BYTES, ge=65_536)

    # --- workers
    worker_concurrency: Annotated[int, Field(ge=1, le=64)] | Literal["auto"] = Field(
        defaults.WORKER_CONCURRENCY, description="worker processes on a host, or `auto`"
    )
    cpu_oversubscribe: float = Field(
        defaults.CPU_OVERSUBSCRIBE, gt=0, le=64, description="a host's CPU budget: CPUs times this"
    )
    memory_oversubscribe: float = Field(
        defaults.MEMORY_OVERSUBSCRIBE, gt=0, le=4, description="its memory budget, likewise"
    )
    heartbeat_s: float = defaults.HEARTBEAT_S
    heartbeat_ttl_s: float = defaults.HEARTBEAT_TTL_S
    reaper_interval_s: float = defaults.REAPER_INTERVAL_S
    compile_cache_mb: int = Field(
        defaults.COMPILE_CACHE_MB, ge=0, description="a host's compiled programs; 0: no cache"
    )
    compile_cache_dir: Path | None = Field(
        None, description="where a host keeps them; unset: ~/.cache/proctor/compile"
    )

    # --- the LLM judge (PROCTOR_JUDGE_*; anticheat.judge.settings.JudgeSettings reads these)
    judge_url: str = Field(
        defaults.JUDGE_URL, description="OpenAI-style base URL with its version; empty: none"
    )
    judge_model: str = Field(
        defaults.JUDGE_MODEL, description="empty: the first model the server lists"
    )
    judge_api_key: str = defaults.JUDGE_API_KEY
    judge_timeout_s: float = Field(
        defaults.JUDGE_TIMEOUT_S, gt=0, description="a whole review of a trajectory"
    )
    judge_max_concurrency: int = Field(
        defaults.JUDGE_MAX_CONCURRENCY, ge=1, description="requests in flight per process"
    )
    judge_threshold: float = Field(defaults.JUDGE_THRESHOLD, ge=0.0, le=1.0)
    judge_failure_policy: Literal["fail_open", "fail_closed"] = defaults.JUDGE_FAILURE_POLICY
    judge_action_budget_s: float = Field(
        defaults.JUDGE_ACTION_BUDGET_S, gt=0, description="a whole review of one action"
    )
    judge_response_format: Literal["auto", "json_schema", "json_object", "none"] = (
        defaults.JUDGE_RESPONSE_FORMAT
    )
    judge_cache_ttl_s: int = defaults.JUDGE_CACHE_TTL_S
    judge_max_prompt_chars: int = defaults.JUDGE_MAX_PROMPT_CHARS
    judge_calibration_interval_s: float = Field(
        defaults.JUDGE_CALIBRATION_INTERVAL_S, gt=0, description="how often the probes run"
    )

    @property
    def deployment_id(self) -> str:
        """Names this deployment on a Docker engine that others may share: the setting,
        else the Redis it uses (host, port, database; not the password, which may change)."""
        if self.deployment:
            return self.deployment
        url = urlsplit(self.redis_url)
        where = f"{url.hostname}:{url.port or 6379}{url.path or '/0'}"
        return hashlib.sha256(where.encode()).hexdigest()[:12]

    _csv = field_validator("api_tokens", "image_allow", mode="before")(_split_csv)
    _map = field_validator("images", mode="before")(_split_mapping)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment on first use."""
    return Settings()
