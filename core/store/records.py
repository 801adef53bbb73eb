"""An episode's hash as typed records: its fields (`RecordField`), the decoded record
(`EpisodeRecord`), an interactive sandbox's state (`SandboxState`) and the short summary
the janitors scan (`EpisodeSummary`). Decoded and encoded here and nowhere else."""

from __future__ import annotations

import json
import uuid
from base64 import b64decode, b64encode
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from core.store.encoding import as_text, dump_json
from proctor.models import EpisodeCreate, EpisodeMode, EpisodeResult, EpisodeStatus, Observation


class RecordField(StrEnum):
    """The fields of an episode's hash (see the module docstring)."""

    request = "request"
    status = "status"
    mode = "mode"
    created = "created"
    worker = "worker"
    host = "host"
    container = "container"
    container_name = "container_name"
    container_ip = "container_ip"
    keep = "keep"
    restore = "restore"
    observation = "observation"
    sandbox_start_s = "sandbox_start_s"
    warm = "warm"
    last_action = "last_action"
    steps = "steps"
    result = "result"
    finished = "finished"
    summary = "summary"
    ahead = "ahead"  # queued episodes ahead of it when it was admitted (the pace)
    admitted = "admitted"  # … and when, by Redis's clock


def new_episode_id() -> str:
    return "ep_" + uuid.uuid4().hex


SUMMARY_FIELDS = (
    RecordField.status,
    RecordField.worker,
    RecordField.mode,
    RecordField.created,
    RecordField.last_action,
)


class MissingSandbox(KeyError):
    """The record has no sandbox state (not an interactive episode that started)."""


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    id: str
    status: EpisodeStatus
    worker: str | None
    interactive: bool
    created: float
    last_action: float


@dataclass(frozen=True, slots=True)
class SandboxState:
    """An interactive episode's sandbox as its start leaves it for the actions and the
    finish; encoded into (and decoded from) the record's fields here and nowhere else."""

    host: str  # the worker host that holds the container (its queue takes the actions)
    container_id: str
    container_name: str
    container_ip: str | None
    keep: frozenset[str]  # paths the grading leaves as the agent wrote them
    restore: Mapping[str, str | bytes]  # protected path → what the grading puts back
    observation: Observation  # the first observation, the answer to the create
    sandbox_start_s: float
    warm: bool  # the container came from the warm pool

    def encode(self) -> dict[str, str]:
        return {
            RecordField.host: self.host,
            RecordField.container: self.container_id,
            RecordField.container_name: self.container_name,
            RecordField.container_ip: self.container_ip or "",
            RecordField.keep: json.dumps(sorted(self.keep)),
            RecordField.restore: json.dumps(
                {
                    p: c if isinstance(c, str) else {"b64": b64encode(c).decode()}
                    for p, c in self.restore.items()
                }
            ),
            RecordField.observation: dump_json(self.observation),
            RecordField.sandbox_start_s: repr(self.sandbox_start_s),
            RecordField.warm: "1" if self.warm else "0",
        }

    @classmethod
    def decode(cls, fields: Mapping[str, str]) -> SandboxState | None:
        """The state in a record's fields; None before the sandbox was started."""
        if RecordField.observation not in fields or RecordField.container not in fields:
            return None
        return cls(
            host=fields.get(RecordField.host, ""),
            container_id=fields[RecordField.container],
            container_name=fields.get(RecordField.container_name, ""),
            container_ip=fields.get(RecordField.container_ip) or None,
            keep=frozenset(json.loads(fields.get(RecordField.keep, "[]"))),
            restore={
                p: c if isinstance(c, str) else b64decode(c["b64"])
                for p, c in json.loads(fields.get(RecordField.restore, "{}")).items()
            },
            observation=Observation.model_validate_json(fields[RecordField.observation]),
            sandbox_start_s=float(fields.get(RecordField.sandbox_start_s, 0)),
            warm=fields.get(RecordField.warm) == "1",
        )


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """An episode's hash, decoded (see the module docstring for who writes what)."""

    id: str
    status: EpisodeStatus
    request: EpisodeCreate
    created: float
    result: EpisodeResult | None
    worker: str | None = None
    host: str | None = None
    container: str | None = None  # one-shot: the container's name; interactive: its id
    last_action: float | None = None
    steps: int = 0
    finished: float | None = None
    sandbox: SandboxState | None = None  # interactive, once started

    def public(self) -> EpisodeResult:
        """What GET /v1/episodes/{id} shows: the result when there is one, else the status."""
        if self.result is not None:
            return self.result
        return EpisodeResult(
            id=self.id,
            status=self.status,
            mode=self.request.mode,
            metadata=self.request.metadata,
            created_at=datetime.fromtimestamp(self.created, UTC),
        )

    def started_sandbox(self) -> SandboxState:
        """The interactive sandbox; `MissingSandbox` when it was never started."""
        if self.sandbox is None:
            raise MissingSandbox(f"episode {self.id} has no sandbox")
        return self.sandbox


def decode_record(episode_id: str, raw: dict[Any, Any]) -> EpisodeRecord | None:
    fields = {as_text(k): as_text(v) for k, v in raw.items()}
    if RecordField.request not in fields:  # a record being created or already half-expired
        return None
    result = fields.get(RecordField.result)
    last_action = fields.get(RecordField.last_action)
    finished = fields.get(RecordField.finished)
    interactive = fields.get(RecordField.mode) == EpisodeMode.interactive.value
    return EpisodeRecord(
        id=episode_id,
        status=EpisodeStatus(fields[RecordField.status]),
        request=EpisodeCreate.model_validate_json(fields[RecordField.request]),
        created=float(fields.get(RecordField.created, "0")),
        result=EpisodeResult.model_validate_json(result) if result else None,
        worker=fields.get(RecordField.worker),
        host=fields.get(RecordField.host),
        container=fields.get(RecordField.container),
        last_action=float(last_action) if last_action else None,
        steps=int(fields.get(RecordField.steps, "0")),
        finished=float(finished) if finished else None,
        sandbox=SandboxState.decode(fields) if interactive else None,
    )
