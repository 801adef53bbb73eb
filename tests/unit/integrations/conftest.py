"""A stand-in Proctor API on `httpx.MockTransport`, to check how the adapters call it.

The adapters' behaviour against the real service is tested end to end (tests/e2e); here
the question is only what they send and how they read the answers. An episode's outcome
is chosen by its solution's text: `RIGHT` passes, `WRONG` fails, `INFRA` is our failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from proctor.models import (
    EpisodeCreate,
    EpisodeResult,
    EpisodeResults,
    EpisodeStatus,
    Observation,
    StepResult,
    TestCase,
    TestOutcome,
    Verdict,
)


class FakeProctor:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.episodes: dict[str, EpisodeCreate] = {}
        self.actions: list[dict[str, Any]] = []
        self.refuse_images: set[str] = set()
        self.overloaded_times = 0
        self.running_rounds = 0  # results requests answered "still running"
        self.expired: set[str] = set()  # episodes whose result is gone
        self.lost_answers = 0  # batches taken whose answer the connection then loses
        self.keyed: dict[str, str] = {}  # idempotency key -> episode, as the service keeps
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append((request.method, path))
        body = json.loads(request.content) if request.content else None
        if request.method == "POST" and path == "/v1/episodes/batch":
            if self.overloaded_times > 0:
                self.overloaded_times -= 1
                return httpx.Response(
                    429, headers={"Retry-After": "0"}, json={"error": {"message": "full"}}
                )
            episodes = [EpisodeCreate.model_validate(e) for e in body["episodes"]]
            if any(e.task.image in self.refuse_images for e in episodes):
                return httpx.Response(422, json={"error": {"message": "unknown image"}})
            ids = [self._add(e) for e in episodes]
            if self.lost_answers > 0:
                self.lost_answers -= 1
                raise httpx.ReadError("the connection was lost after the batch was taken")
            return httpx.Response(202, json={"ids": ids})
        if request.method == "POST" and path == "/v1/episodes/results":
            ids = body["ids"]
            known = [i for i in ids if i in self.episodes and i not in self.expired]
            running = self.running_rounds > 0
            self.running_rounds -= 1
            answer = EpisodeResults(
                results=[] if running else [self.result(i) for i in known],
                pending=known if running else [],
                unknown=[i for i in ids if i not in known],
            )
            return httpx.Response(200, json=answer.model_dump(mode="json"))
        if request.method == "POST" and path == "/v1/episodes":
            episode_id = self._add(EpisodeCreate.model_validate(body))
            return httpx.Response(
                201, json={"id": episode_id, "status": "running", "observation": {"output": ""}}
            )
        parts = path.strip("/").split("/")
        episode_id = parts[2]
        if request.method == "GET":
            return httpx.Response(200, json=self.result(episode_id).model_dump(mode="json"))
        if parts[-1] == "actions":
            self.actions.append(body)
            step = StepResult(
                id=episode_id,
                step=len(self.actions),
                observation=Observation(output=f"ran {body.get('command')}\n", exit_code=0),
            )
            return httpx.Response(200, json=step.model_dump(mode="json"))
        if parts[-1] == "finish":
            return httpx.Response(200, json=self.result(episode_id).model_dump(mode="json"))
        return httpx.Response(404)

    def _add(self, episode: EpisodeCreate) -> str:
        key = episode.idempotency_key
        if key is not None and key in self.keyed:
            return self.keyed[key]
        episode_id = f"ep_{len(self.episodes)}"
        self.episodes[episode_id] = episode
        if key is not None:
            self.keyed[key] = episode_id
        return episode_id

    def result(self, episode_id: str) -> EpisodeResult:
        episode = self.episodes[episode_id]
        text = "".join(episode.solution.files.values()) if episode.solution else ""
        if episode.solution is None:  # interactive: graded by the commands it ran
            text = " ".join(str(a.get("command")) for a in self.actions)
        if "INFRA" in text:
            return EpisodeResult(
                id=episode_id,
                status=EpisodeStatus.failed,
                verdict=Verdict.infra_error,
                error="docker is down",
            )
        right = "RIGHT" in text
        tests = [
            TestCase(
                name="test_proctor_cases.py::test_case[case_0]",
                outcome=TestOutcome.passed if right else TestOutcome.failed,
            )
        ]
        return EpisodeResult(
            id=episode_id,
            status=EpisodeStatus.completed,
            reward=1.0 if right else 0.0,
            passed=right,
            verdict=Verdict.passed if right else Verdict.failed,
            tests=tests,
        )


@pytest.fixture
def fake() -> Iterator[FakeProctor]:
    yield FakeProctor()
