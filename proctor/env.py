"""A gym-style environment over interactive episodes, for agent loops.

    with Env("http://127.0.0.1:8000") as env:
        observation = env.reset(task)
        while not done:
            observation, done, info = env.step({"type": "bash", "command": "pytest -q"})
        result = env.close()          # runs the hidden tests; result.reward

`step` is `done` once the episode can take no more actions (it ended on the server, e.g.
at its idle or total time limit, or the agent gave up: `{"type": "give_up", "reason": …}`,
or `env.give_up(reason)`, which ends it as `gave_up` with the policy's `give_up_reward`,
graded no further); `close` finishes it and returns the graded result (or the ended one).
SkyRL, rLLM, verl's agent loop and OpenRLHF's AgentExecutor all drive this shape.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from proctor.client import ApiError, AsyncClient, Client
from proctor.models import (
    EpisodeCreate,
    EpisodeMode,
    EpisodeResult,
    GiveUpAction,
    InteractiveAction,
    Observation,
    TaskSpec,
)

__all__ = ["AsyncEnv", "Env"]

_ACTION: TypeAdapter[InteractiveAction] = TypeAdapter(InteractiveAction)
Info = dict[str, Any]


def _episode(task: TaskSpec | dict[str, Any], metadata: dict[str, str] | None) -> EpisodeCreate:
    spec = task if isinstance(task, TaskSpec) else TaskSpec.model_validate(task)
    return EpisodeCreate(task=spec, mode=EpisodeMode.interactive, metadata=metadata or {})


def _action(action: InteractiveAction | dict[str, Any]) -> InteractiveAction:
    return action if not isinstance(action, dict) else _ACTION.validate_python(action)


class Env:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        token: str | None = None,
        client: Client | None = None,
    ) -> None:
        self._client = client or Client(base_url, token=token)
        self._owns_client = client is None
        self.episode_id: str | None = None
        self.result: EpisodeResult | None = None

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *_: object) -> None:
        if self.episode_id is not None and self.result is None:
            self.close()
        if self._owns_client:
            self._client.close()

    def reset(
        self, task: TaskSpec | dict[str, Any], *, metadata: dict[str, str] | None = None
    ) -> Observation:
        """Open a new episode on `task`; the first observation (cwd and a listing)."""
        if self.episode_id is not None and self.result is None:
            self.close()
        created = self._client.create(_episode(task, metadata))
        if isinstance(created, EpisodeResult):  # it ended before it could start
            raise RuntimeError(f"the episode could not start: {created.error or created.verdict}")
        self.episode_id, self.result = created.id, None
        return created.observation or Observation()

    def step(self, action: InteractiveAction | dict[str, Any]) -> tuple[Observation, bool, Info]:
        episode_id = self._require()
        try:
            answer = self._client.act(episode_id, _action(action))
        except ApiError as exc:
            if exc.status == 409:  # ended on the server (time limit, cancel)
                self.result = self._client.get(episode_id)
                return Observation(stderr=str(exc)), True, {"id": episode_id, "result": self.result}
            raise
        info: Info = {"id": episode_id, "step": answer.step}
        if answer.done:  # it ended with this action (a give-up): its result is final
            self.result = info["result"] = self._client.get(episode_id)
        return answer.observation, answer.done, info

    def give_up(self, reason: str = "") -> EpisodeResult:
        """End the episode as given up: `gave_up`, the policy's `give_up_reward`."""
        self.step(GiveUpAction(reason=reason))
        return self.close()

    def close(self) -> EpisodeResult:
        """Finish: kill the agent's processes, run the hidden tests, return the result."""
        episode_id = self._require()
        if self.result is None:
            try:
                self.result = self._client.finish(episode_id)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                self.result = self._client.get(episode_id)
        return self.result

    def _require(self) -> str:
        if self.episode_id is None:
            raise RuntimeError("call reset(task) first")
        return self.episode_id


class AsyncEnv:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        token: str | None = None,
        client: AsyncClient | None = None,
    ) -> None:
        self._client = client or AsyncClient(base_url, token=token)
        self._owns_client = client is None
        self.episode_id: str | None = None
        self.result: EpisodeResult | None = None

    async def __aenter__(self) -> AsyncEnv:
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.episode_id is not None and self.result is None:
            await self.close()
        if self._owns_client:
            await self._client.aclose()

    async def reset(
        self, task: TaskSpec | dict[str, Any], *, metadata: dict[str, str] | None = None
    ) -> Observation:
        if self.episode_id is not None and self.result is None:
            await self.close()
        created = await self._client.create(_episode(task, metadata))
        if isinstance(created, EpisodeResult):
            raise RuntimeError(f"the episode could not start: {created.error or created.verdict}")
        self.episode_id, self.result = created.id, None
        return created.observation or Observation()

    async def step(
        self, action: InteractiveAction | dict[str, Any]
    ) -> tuple[Observation, bool, Info]:
        episode_id = self._require()
        try:
            answer = await self._client.act(episode_id, _action(action))
        except ApiError as exc:
            if exc.status == 409:
                self.result = await self._client.get(episode_id)
                return Observation(stderr=str(exc)), True, {"id": episode_id, "result": self.result}
            raise
        info: Info = {"id": episode_id, "step": answer.step}
        if answer.done:
            self.result = info["result"] = await self._client.get(episode_id)
        return answer.observation, answer.done, info

    async def give_up(self, reason: str = "") -> EpisodeResult:
        """As `Env.give_up`."""
        await self.step(GiveUpAction(reason=reason))
        return await self.close()

    async def close(self) -> EpisodeResult:
        episode_id = self._require()
        if self.result is None:
            try:
                self.result = await self._client.finish(episode_id)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                self.result = await self._client.get(episode_id)
        return self.result

    def _require(self) -> str:
        if self.episode_id is None:
            raise RuntimeError("call reset(task) first")
        return self.episode_id
