"""verl: reward functions for `custom_reward_function`, and a tool for multi-turn agents.

    custom_reward_function.path=pkg://proctor.integrations.verl
    custom_reward_function.name=compute_score        # naive / dapo managers, the reward loop
                               compute_score_async  # the reward loop, without a thread each
                               compute_score_float  # the prime manager (it wants a number)
                               compute_score_batch  # the batch manager
    +custom_reward_function.reward_kwargs.proctor_url=http://proctor:8000

Every call returns the same keys for every sample (verl stacks them into per-key columns):
`score`, `acc`, `verdict`, `tests_passed`, `tests_total`, `infra_error`, `episode_id`,
`error`. An infrastructure failure scores `infra_score` (0.0 by default; verl cannot drop
a sample) with `infra_error` set, so it can be told apart from a wrong answer.

`ground_truth` is any format `codetasks` reads: verl's `{"inputs", "outputs", "fn_name"?}`
and `{"assert_case": [...]}`, APPS/TACO/HumanEval rows, or a Proctor task. The ground truth
`"proctor:tool_reward"` scores a multi-turn trajectory by what its `submit` tool call earned.

`ProctorTool` is a verl `BaseTool` for multi-turn agents (see `examples/verl_tool_config.yaml`):
one Proctor interactive episode per trajectory, whichever tool instance a call arrives on.
It is built on first access, on verl's own `BaseTool` when verl is installed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from uuid import uuid4

import httpx
from pydantic import BaseModel, Field, ValidationError

from proctor.client import ApiError, AsyncClient, Client, Overloaded, ProctorError
from proctor.integrations import _env
from proctor.integrations.codetasks import (
    CodeTaskOptions,
    GroundTruthError,
    Outcome,
    case_counts,
    episode_for,
    extract_code,
    run_episodes,
    run_episodes_async,
)
from proctor.models import (
    Action,
    BashAction,
    EpisodeCreate,
    EpisodeMode,
    EpisodeResult,
    Observation,
    ReadFileAction,
    Scoring,
    TaskSpec,
    Verdict,
    WriteFileAction,
)

__all__ = [  # noqa: F822 - ProctorTool is built on first access (module __getattr__)
    "RESULT_KEYS",
    "TOOL_REWARD",
    "ProctorTool",
    "compute_score",
    "compute_score_async",
    "compute_score_batch",
    "compute_score_float",
]

log = logging.getLogger(__name__)

TOOL_REWARD = "proctor:tool_reward"
RESULT_KEYS = (
    "score",
    "acc",
    "verdict",
    "tests_passed",
    "tests_total",
    "infra_error",
    "episode_id",
    "error",
)
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True, slots=True)
class _Config:
    url: str
    token: str | None
    timeout_s: float
    infra_score: float
    options: CodeTaskOptions
    transport: Any  # a test seam (httpx.MockTransport); verl never passes one


def _config(kwargs: Mapping[str, Any]) -> _Config:
    """Settings from `reward_kwargs`, then `PROCTOR_URL`/`PROCTOR_TOKEN`; unknown keys ignored.

    verl adds keys of its own (`reward_router_address`, …) to some calls, so extra keyword
    arguments must not be an error.
    """
    defaults = CodeTaskOptions()
    max_cases = kwargs.get("max_cases")
    options = CodeTaskOptions(
        case_timeout_s=float(kwargs.get("case_timeout_s", defaults.case_timeout_s)),
        memory_mb=int(kwargs.get("memory_mb", defaults.memory_mb)),
        scoring=Scoring(kwargs.get("scoring", defaults.scoring)),
        image=str(kwargs.get("image", defaults.image)),
        max_cases=None if max_cases is None else int(max_cases),
    )
    service = _env.service(kwargs.get("proctor_url"), kwargs.get("proctor_token"))
    return _Config(
        url=str(service.url),
        token=service.token,
        timeout_s=float(kwargs.get("timeout_s", DEFAULT_TIMEOUT_S)),
        infra_score=float(kwargs.get("infra_score", 0.0)),
        options=options,
        transport=kwargs.get("transport"),
    )


def _episode(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any, config: _Config
) -> EpisodeCreate:
    metadata = {"trainer": "verl", "data_source": str(data_source)[:200]}
    if isinstance(extra_info, Mapping) and "index" in extra_info:
        metadata["index"] = str(extra_info["index"])[:200]
    return episode_for(
        ground_truth, extract_code(solution_str or ""), config.options, metadata=metadata
    )


def _row(outcome: Outcome | GroundTruthError, config: _Config) -> dict[str, Any]:
    """One sample's dict: the same keys and types whatever happened."""
    if isinstance(outcome, EpisodeResult) and outcome.reward is not None:
        passed, total = case_counts(outcome)
        return {
            "score": float(outcome.reward),
            "acc": float(bool(outcome.passed)),
            "verdict": str(outcome.verdict or ""),
            "tests_passed": passed,
            "tests_total": total,
            "infra_error": 0.0,
            "episode_id": outcome.id,
            "error": "",
        }
    if isinstance(outcome, GroundTruthError):
        # the data is wrong, not the answer: say so loudly, but keep training
        log.warning("verl reward: %s", outcome)
        return _failed_row(0.0, Verdict.failed, "", f"ground truth: {outcome}")
    if isinstance(outcome, EpisodeResult):
        message = outcome.error or outcome.reason or str(outcome.verdict)
        return _failed_row(config.infra_score, outcome.verdict, outcome.id, message, infra=True)
    if isinstance(outcome, ApiError) and not isinstance(outcome, Overloaded):
        # the service refused the task itself (a limit over the deployment's maximum, a
        # field it cannot read): the data is wrong, as with bad ground truth
        log.warning("verl reward: the service refused the task: %s", outcome)
        return _failed_row(0.0, Verdict.failed, "", f"refused: {outcome}")
    return _failed_row(config.infra_score, Verdict.infra_error, "", str(outcome), infra=True)


def _failed_row(
    score: float, verdict: Verdict | None, episode_id: str, error: str, *, infra: bool = False
) -> dict[str, Any]:
    return {
        "score": score,
        "acc": 0.0,
        "verdict": str(verdict or ""),
        "tests_passed": 0,
        "tests_total": 0,
        "infra_error": 1.0 if infra else 0.0,
        "episode_id": episode_id,
        "error": error[:500],
    }


def _tool_row(extra_info: Any) -> dict[str, Any]:
    """A trajectory scored by its `submit` call: verl hands tool rewards in `extra_info`."""
    rewards = extra_info.get("tool_rewards") if isinstance(extra_info, Mapping) else None
    submitted = [float(r) for r in rewards or [] if r is not None]
    if not submitted:
        return _failed_row(0.0, Verdict.failed, "", "the trajectory never submitted")
    score = submitted[-1]
    return {
        "score": score,
        "acc": float(score >= 1.0),
        "verdict": "",
        "tests_passed": 0,
        "tests_total": 0,
        "infra_error": 0.0,
        "episode_id": "",
        "error": "",
    }


def _is_tool_reward(ground_truth: Any) -> bool:
    return isinstance(ground_truth, str) and ground_truth.strip() == TOOL_REWARD


def _client(config: _Config) -> Client:
    transport = config.transport if isinstance(config.transport, httpx.BaseTransport) else None
    return Client(config.url, token=config.token, transport=transport)


def _async_client(config: _Config) -> AsyncClient:
    transport = config.transport if isinstance(config.transport, httpx.AsyncBaseTransport) else None
    return AsyncClient(config.url, token=config.token, transport=transport)


# ------------------------------------------------------------------------ reward functions


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's reward function signature; runs the sample as one Proctor episode."""
    return compute_score_batch(
        data_sources=[data_source],
        solution_strs=[solution_str],
        ground_truths=[ground_truth],
        extra_infos=[extra_info],
        **kwargs,
    )[0]


def compute_score_float(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> float:
    """The score alone, for verl's `prime` manager (it calls positionally in a process pool)."""
    row = compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    return float(row["score"])


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's `batch` manager signature: the whole batch submitted at once, one dict per sample."""
    config = _config(kwargs)
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    rows: list[dict[str, Any] | None] = [None] * len(solution_strs)
    pending: list[tuple[int, EpisodeCreate]] = []
    for i, (source, text, truth, info) in enumerate(
        zip(data_sources, solution_strs, ground_truths, infos, strict=True)
    ):
        if _is_tool_reward(truth):
            rows[i] = _tool_row(info)
            continue
        try:
            pending.append((i, _episode(source, text, truth, info, config)))
        except GroundTruthError as exc:
            rows[i] = _row(exc, config)
    if pending:
        with _client(config) as client:
            outcomes = run_episodes(client, [e for _, e in pending], timeout_s=config.timeout_s)
        for (i, _), outcome in zip(pending, outcomes, strict=True):
            rows[i] = _row(outcome, config)
    return [row for row in rows if row is not None]


async def compute_score_async(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`compute_score` as a coroutine: verl's reward loop awaits it instead of using a thread."""
    config = _config(kwargs)
    if _is_tool_reward(ground_truth):
        return _tool_row(extra_info)
    try:
        episode = _episode(data_source, solution_str, ground_truth, extra_info, config)
    except GroundTruthError as exc:
        return _row(exc, config)
    async with _async_client(config) as client:
        [outcome] = await run_episodes_async(client, [episode], timeout_s=config.timeout_s)
    return _row(outcome, config)


# ------------------------------------------------------------------------ the multi-turn tool

TOOL_ACTIONS = ("bash", "write_file", "read_file", "submit", "give_up")
# trajectories remembered per process; an episode forgotten unsubmitted is ended by the
# service when it idles
MAX_TRAJECTORIES = 10_000
_STRING = "string"
_SCHEMAS: dict[str, tuple[str, dict[str, dict[str, str]], list[str]]] = {
    "bash": (
        "Run a bash command in the task's sandbox and see its output.",
        {"command": {"type": _STRING, "description": "the command to run"}},
        ["command"],
    ),
    "write_file": (
        "Write a file in the workspace.",
        {
            "path": {"type": _STRING, "description": "path relative to the workspace"},
            "content": {"type": _STRING, "description": "the whole new content"},
        },
        ["path", "content"],
    ),
    "read_file": (
        "Read a file of the workspace.",
        {"path": {"type": _STRING, "description": "path relative to the workspace"}},
        ["path"],
    ),
    "submit": ("Submit the work for grading. The episode ends.", {}, []),
    "give_up": (
        "Give up on the task, when it cannot be done honestly. The episode ends ungraded.",
        {"reason": {"type": _STRING, "description": "why the task cannot be done"}},
        [],
    ),
}


class _CompatFunction(BaseModel):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class _CompatToolSchema(BaseModel):
    """verl's OpenAIFunctionToolSchema, as far as a tool uses it (verl absent)."""

    type: str = "function"
    function: _CompatFunction


class _CompatToolResponse(BaseModel):
    text: str | None = None
    image: list[Any] | None = None
    video: list[Any] | None = None


class _CompatBaseTool:
    """verl's BaseTool contract, for running the tool where verl is not installed."""

    def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
        self.config = config
        if isinstance(tool_schema, Mapping):
            tool_schema = _CompatToolSchema.model_validate(tool_schema)
        self.tool_schema = tool_schema or self.get_openai_tool_schema()
        self.name = self.tool_schema.function.name

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema


@cache
def _verl_classes() -> tuple[type, type, type]:
    """(BaseTool, ToolResponse, OpenAIFunctionToolSchema): verl's when installed."""
    try:
        from verl.tools.base_tool import BaseTool
        from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
    except ImportError:
        return _CompatBaseTool, _CompatToolResponse, _CompatToolSchema
    return BaseTool, ToolResponse, OpenAIFunctionToolSchema


def _response(text: str | None) -> Any:
    return _verl_classes()[1](text=text)


class _Trajectories:
    """The episode each trajectory has open, shared by every ProctorTool of the process.

    verl creates, executes and releases a tool instance for every single call, so the
    episode must be found by the trajectory (`agent_data.request_id`), not by the instance.
    """

    def __init__(self) -> None:
        self.episodes: OrderedDict[str, str] = OrderedDict()
        self.ended: OrderedDict[str, None] = OrderedDict()
        self.locks: dict[str, asyncio.Lock] = {}

    def lock(self, key: str) -> asyncio.Lock:
        return self.locks.setdefault(key, asyncio.Lock())

    def open(self, key: str, episode_id: str) -> None:
        self.episodes[key] = episode_id
        while len(self.episodes) > MAX_TRAJECTORIES:
            old, _ = self.episodes.popitem(last=False)
            self.locks.pop(old, None)

    def end(self, key: str) -> None:
        self.episodes.pop(key, None)
        self.locks.pop(key, None)
        self.ended[key] = None
        while len(self.ended) > MAX_TRAJECTORIES:
            self.ended.popitem(last=False)


def _action_of(kind: str, parameters: Mapping[str, Any], config: Mapping[str, Any]) -> Action:
    if kind == "bash":
        timeout = float(parameters.get("timeout", config.get("timeout_s", 30.0)))
        return BashAction(command=str(parameters["command"]), timeout_s=min(timeout, 3600.0))
    if kind == "write_file":
        return WriteFileAction(path=str(parameters["path"]), content=str(parameters["content"]))
    return ReadFileAction(path=str(parameters["path"]))


def _observation_text(observation: Observation) -> str:
    text = observation.output
    if observation.stderr:
        text += ("\n" if text and not text.endswith("\n") else "") + observation.stderr
    if observation.timed_out:
        text += "\n[timed out]"
    elif observation.exit_code not in (0, None):
        text += f"\n[exit code {observation.exit_code}]"
    return text


class _ProctorToolMixin:
    """A verl tool acting in one Proctor interactive episode per trajectory.

    `config.action` picks what the tool does: `bash`, `write_file`, `read_file`, `submit`
    (finishes the episode; its reward is the tool reward, which verl passes to the reward
    function as `extra_info["tool_rewards"]`), or `give_up` (ends it ungraded, `gave_up`,
    with the task policy's `give_up_reward` as the tool reward). The task comes from the dataset row
    (`tools_kwargs.<tool>.create_kwargs.task`) or from `config.task`.
    """

    _trajectories = _Trajectories()
    config: dict[str, Any]

    def __init__(self, config: dict[str, Any], tool_schema: Any = None) -> None:
        self._action = str(config.get("action", "bash"))
        if self._action not in TOOL_ACTIONS:
            raise ValueError(
                f"ProctorTool action must be one of {TOOL_ACTIONS}, not {self._action!r}"
            )
        self._tasks: dict[str, Any] = {}
        super().__init__(config, tool_schema)  # type: ignore[call-arg]

    def get_openai_tool_schema(self) -> Any:
        existing = self.__dict__.get("tool_schema")
        if existing is not None:
            return existing
        description, properties, required = _SCHEMAS[self._action]
        schema: Any = _verl_classes()[2]
        return schema.model_validate(
            {
                "type": "function",
                "function": {
                    "name": self._action,
                    "description": description,
                    "parameters": {
                        "type": "object",
                        "properties": properties,
                        "required": required,
                    },
                },
            }
        )

    def _client(self) -> AsyncClient:
        return _async_client(_config(self.config))

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        # verl's agent loop passes `create_kwargs={...}`; older rollouts spread them
        options = kwargs.get("create_kwargs") or kwargs
        instance_id = instance_id or uuid4().hex
        self._tasks[instance_id] = options.get("task") or self.config.get("task")
        return instance_id, _response(None)

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float | None, dict[str, Any]]:
        key = str(getattr(kwargs.get("agent_data"), "request_id", None) or instance_id)
        try:
            if self._action == "submit":
                return await self._submit(key)
            if self._action == "give_up":
                return await self._give_up(key, str(parameters.get("reason", "")))
            return await self._act(key, instance_id, parameters)
        except ProctorError as exc:
            log.warning("trajectory %s: Proctor is unavailable: %s", key, exc)
            text = f"error: the sandbox is unavailable ({exc})"
            return _response(text), None, {"infra_error": 1.0}

    async def _act(
        self, key: str, instance_id: str, parameters: Mapping[str, Any]
    ) -> tuple[Any, float | None, dict[str, Any]]:
        try:
            action = _action_of(self._action, parameters, self.config)
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            return _response(f"error: invalid arguments for {self._action}: {exc}"), None, {}
        async with self._client() as client:
            episode_id = await self._episode(client, key, instance_id)
            if episode_id is None:
                return _response("The episode has ended."), None, {}
            step = await client.act(episode_id, action)
        if step.done:
            self._trajectories.end(key)
        return _response(_observation_text(step.observation)), None, {"step": step.step}

    async def _episode(self, client: AsyncClient, key: str, instance_id: str) -> str | None:
        trajectories = self._trajectories
        async with trajectories.lock(key):
            if key in trajectories.ended:
                return None
            if key in trajectories.episodes:
                return trajectories.episodes[key]
            task = self._tasks.get(instance_id) or self.config.get("task")
            if task is None:
                raise ValueError(
                    "no task for this trajectory: set tools_kwargs.<tool>."
                    "create_kwargs.task in the dataset, or config.task"
                )
            spec = TaskSpec.model_validate(json.loads(task) if isinstance(task, str) else task)
            created = await client.create(
                EpisodeCreate(
                    task=spec,
                    mode=EpisodeMode.interactive,
                    metadata={"trainer": "verl", "trajectory": key[:200]},
                )
            )
            trajectories.open(key, created.id)
            return created.id

    async def _submit(self, key: str) -> tuple[Any, float | None, dict[str, Any]]:
        trajectories = self._trajectories
        async with trajectories.lock(key):
            episode_id = trajectories.episodes.get(key)
            if episode_id is None:
                return _response("Nothing to submit."), 0.0, {}
            async with self._client() as client:
                result = await client.finish(episode_id)
            trajectories.end(key)
        metrics = {"episode_id": result.id, "verdict": str(result.verdict or "")}
        if result.reward is None:  # our failure: verl cannot drop it, so count it apart
            return (
                _response("Submitted."),
                _config(self.config).infra_score,
                {**metrics, "infra_error": 1.0},
            )
        return _response("Submitted."), float(result.reward), metrics

    async def _give_up(self, key: str, reason: str) -> tuple[Any, float | None, dict[str, Any]]:
        """End the trajectory's episode as given up: the policy's `give_up_reward`."""
        trajectories = self._trajectories
        async with trajectories.lock(key):
            episode_id = trajectories.episodes.get(key)
            if episode_id is None:
                return _response("Nothing to give up."), 0.0, {}
            async with self._client() as client:
                result = await client.give_up(episode_id, reason[:4096])
            trajectories.end(key)
        metrics = {"episode_id": result.id, "verdict": str(result.verdict or "")}
        return _response("Given up."), float(result.reward or 0.0), metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._tasks.pop(instance_id, None)


@cache
def _tool_class() -> type:
    base = _verl_classes()[0]
    return type(
        "ProctorTool",
        (_ProctorToolMixin, base),
        {
            "__module__": __name__,
            "__qualname__": "ProctorTool",
            "__doc__": _ProctorToolMixin.__doc__,
        },
    )


def __getattr__(name: str) -> Any:
    # verl's BaseTool pulls in verl (and ray): build the tool only when a tool config asks
    # for it, so the reward functions import light in verl's process pools
    if name == "ProctorTool":
        return _tool_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
