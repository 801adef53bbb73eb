"""OpenRLHF: the remote reward (over HTTP or as a `reward_func` file) and a multi-turn agent.

    --remote_rm_url http://proctor:8000/openrlhf/reward    the service scores (route: service/)
    --remote_rm_url /path/to/examples/openrlhf_reward_func.py   `reward_func` below, in-process
    --agent_func_path /path/to/examples/openrlhf_agent.py   `ProctorAgentSession`, multi-turn

OpenRLHF sends `{"query": [...], "prompts": [...], "labels": [...]}` (the query is prompt and
response decoded together) and reads `{"rewards", "scores", "extra_logs"}`. A label carries
the task: the JSON text of any ground truth `codetasks` reads, or the id of a task in a
catalog (`PROCTOR_TASKS_FILE`, JSON Lines). Every answer has a number for every sample: an
infrastructure failure scores `infra_reward` (0.0) with `extra_logs["infra_error"]` = 1,
since OpenRLHF cannot drop a sample; OpenRLHF turns each `extra_logs` value into a tensor,
so they are all numbers, under the same keys every time. Details (episode ids, verdicts,
errors) ride along under `"proctor"`, which OpenRLHF ignores.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import httpx

from proctor.client import AsyncClient, Client, ProctorError
from proctor.integrations import _env
from proctor.integrations.codetasks import (
    CodeTaskOptions,
    GroundTruthError,
    case_counts,
    episode_for,
    extract_code,
    load_catalog,
    resolve_label,
    run_episodes,
    timed_out,
)
from proctor.models import (
    BashAction,
    EpisodeCreate,
    EpisodeMode,
    EpisodeResult,
    Observation,
    TaskSpec,
    Verdict,
)

__all__ = [
    "EXTRA_LOG_KEYS",
    "ProctorAgentSession",
    "build_episodes",
    "response_text",
    "reward_body",
    "reward_func",
    "task_catalog",
]

log = logging.getLogger(__name__)

EXTRA_LOG_KEYS = ("passed", "pass_rate", "infra_error", "timeout", "cheat")
DEFAULT_TIMEOUT_S = 170.0  # OpenRLHF's HTTP client gives up after 180 s
# chat-template markers a decoded query ends with (`skip_special_tokens=False`)
_TRAILING_SPECIALS = re.compile(r"(\s*(<\|[^|>\s]{1,40}\|>|</s>|<eos>|<end_of_turn>))+\s*$")

Sample = EpisodeResult | Exception


def response_text(query: str, prompt: str | None) -> str:
    """The model's response: the query without its prompt and trailing end-of-turn markers."""
    text = query[len(prompt) :] if prompt and query.startswith(prompt) else query
    return _TRAILING_SPECIALS.sub("", text)


@cache
def task_catalog(path: str | None = None) -> dict[str, Any] | None:
    """The catalog at `path` (default `PROCTOR_TASKS_FILE`), read once; None when unset."""
    path = _env.tasks_file(path)
    return load_catalog(path) if path else None


def build_episodes(
    queries: Sequence[str],
    prompts: Sequence[str] | None,
    labels: Sequence[Any] | None,
    *,
    catalog: Mapping[str, Any] | None = None,
    options: CodeTaskOptions | None = None,
) -> list[EpisodeCreate | GroundTruthError]:
    """One episode per query, or the reason its label is not a task."""
    count = len(queries)
    prompt_list = list(prompts) if prompts is not None else [None] * count
    label_list = list(labels) if labels is not None else [None] * count
    if not len(prompt_list) == len(label_list) == count:
        raise ValueError(f"{count} queries, {len(prompt_list)} prompts, {len(label_list)} labels")
    built: list[EpisodeCreate | GroundTruthError] = []
    for query, prompt, label in zip(queries, prompt_list, label_list, strict=True):
        try:
            if label is None:
                raise GroundTruthError("the sample has no label (set --label_key to the task)")
            code = extract_code(response_text(query, prompt))
            built.append(
                episode_for(
                    resolve_label(label, catalog), code, options, metadata={"trainer": "openrlhf"}
                )
            )
        except GroundTruthError as exc:
            built.append(exc)
    return built


def reward_body(samples: Sequence[Sample], *, infra_reward: float = 0.0) -> dict[str, Any]:
    """OpenRLHF's answer, one entry per sample in every list."""
    rewards: list[float] = []
    logs: dict[str, list[float]] = {key: [] for key in EXTRA_LOG_KEYS}
    details: list[dict[str, Any]] = []
    for sample in samples:
        reward, values, detail = _one(sample, infra_reward)
        rewards.append(reward)
        for key in EXTRA_LOG_KEYS:
            logs[key].append(values[key])
        details.append(detail)
    return {
        "rewards": rewards,
        "scores": [min(max(r, 0.0), 1.0) for r in rewards],  # OpenRLHF filters on 0..1
        "extra_logs": logs,
        "proctor": details,
    }


def _one(sample: Sample, infra_reward: float) -> tuple[float, dict[str, float], dict[str, Any]]:
    values = dict.fromkeys(EXTRA_LOG_KEYS, 0.0)
    if isinstance(sample, EpisodeResult) and sample.reward is not None:
        passed, total = case_counts(sample)
        values.update(
            passed=float(bool(sample.passed)),
            pass_rate=passed / total if total else float(bool(sample.passed)),
            timeout=float(timed_out(sample)),
            cheat=float(sample.verdict is Verdict.cheat),
        )
        detail = {"episode_id": sample.id, "verdict": str(sample.verdict or ""), "error": ""}
        return float(sample.reward), values, detail
    if isinstance(sample, GroundTruthError):  # the data, not the answer, is wrong
        return 0.0, values, {"episode_id": "", "verdict": "", "error": f"label: {sample}"}
    values["infra_error"] = 1.0
    if isinstance(sample, EpisodeResult):
        error = sample.error or sample.reason or str(sample.verdict)
        detail = {"episode_id": sample.id, "verdict": str(sample.verdict or ""), "error": error}
    else:
        detail = {"episode_id": "", "verdict": Verdict.infra_error.value, "error": str(sample)}
    return infra_reward, values, detail


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any
) -> dict[str, Any]:
    """OpenRLHF's `reward_func(queries, prompts, labels)`, run against a Proctor service.

    Keyword settings (else the environment): `proctor_url` (`PROCTOR_URL`), `proctor_token`
    (`PROCTOR_TOKEN`), `tasks_file` (`PROCTOR_TASKS_FILE`), `timeout_s`, `infra_reward`.
    """
    service = _env.service(kwargs.get("proctor_url"), kwargs.get("proctor_token"))
    transport = kwargs.get("transport")  # a test seam: httpx.MockTransport
    try:
        catalog = task_catalog(kwargs.get("tasks_file"))
    except (OSError, ValueError) as exc:
        log.error("the task catalog cannot be read: %s", exc)
        catalog = None
    built = build_episodes(queries, prompts, labels, catalog=catalog)
    samples: list[Sample] = [b for b in built if isinstance(b, GroundTruthError)]
    episodes = [b for b in built if isinstance(b, EpisodeCreate)]
    outcomes: list[Sample] = []
    if episodes:
        with Client(service.url, token=service.token, transport=transport) as client:
            outcomes = list(
                run_episodes(
                    client, episodes, timeout_s=float(kwargs.get("timeout_s", DEFAULT_TIMEOUT_S))
                )
            )
    ordered = iter(outcomes)
    bad = iter(samples)
    merged = [next(ordered) if isinstance(b, EpisodeCreate) else next(bad) for b in built]
    return reward_body(merged, infra_reward=float(kwargs.get("infra_reward", 0.0)))


# ------------------------------------------------------------------------- the agent


class _Scalar(float):
    """A float with `.item()`: OpenRLHF reads step rewards as tensors; this needs no torch."""

    def item(self) -> float:
        return float(self)


_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?[^\n]*\n(.*?)```", re.DOTALL)
_SUBMIT = re.compile(r"<submit\s*/?>", re.IGNORECASE)
_GIVE_UP = re.compile(r"<give_up\s*/>|<give_up>(.*?)</give_up>", re.IGNORECASE | re.DOTALL)
HINT = (
    "Run a command in a ```bash block, or reply <submit/> when the work is done "
    "(<give_up>why</give_up> if it cannot be done)."
)


class ProctorAgentSession:
    """One OpenRLHF agent instance: a Proctor interactive episode, opened at the first command.

    The model acts with a ```bash block and ends with `<submit/>`, or `<give_up>why</give_up>`
    (the episode ends ungraded: `gave_up`, the policy's `give_up_reward`); the episode's
    reward is paid at the ending step (0 before). `reset`/`step` take and return what OpenRLHF's
    `AgentInstanceBase` does, so an `AgentInstance` only has to delegate to this.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        token: str | None = None,
        max_steps: int = 16,
        command_timeout_s: float = 60.0,
        feedback: str = "\n\nOutput:\n{output}\n\n",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        service = _env.service(url, token)
        self._client = AsyncClient(service.url, token=service.token, transport=transport)
        self._max_steps = max_steps
        self._command_timeout_s = command_timeout_s
        self._feedback = feedback
        self._task: TaskSpec | None = None
        self._episode_id: str | None = None
        self._steps = 0

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        label = resolve_label(states.get("label"), task_catalog())
        self._task = (
            TaskSpec.model_validate_json(label)
            if isinstance(label, str)
            else TaskSpec.model_validate(label)
        )
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self._steps += 1
        action_text: str = states.get("action_text", "")
        try:
            if given_up := _GIVE_UP.search(action_text):
                return await self._give_up(states, given_up.group(1) or "")
            if _SUBMIT.search(action_text) or self._steps >= self._max_steps:
                return await self._finish(states)
            block = _BASH_BLOCK.search(action_text)
            if block is None:
                return self._answer(states, HINT, 0.0, done=False)
            return await self._run(states, block.group(1))
        except ProctorError as exc:
            log.warning("episode %s: Proctor is unavailable: %s", self._episode_id, exc)
            await self._client.aclose()
            return self._answer(states, "The environment failed.", 0.0, done=True, infra=True)

    async def _run(self, states: dict[str, Any], command: str) -> dict[str, Any]:
        if self._episode_id is None:
            assert self._task is not None, "reset() first"
            created = await self._client.create(
                EpisodeCreate(
                    task=self._task, mode=EpisodeMode.interactive, metadata={"trainer": "openrlhf"}
                )
            )
            self._episode_id = created.id
        step = await self._client.act(
            self._episode_id, BashAction(command=command, timeout_s=self._command_timeout_s)
        )
        if step.done:  # the service ended it (its budget ran out): collect the result
            return await self._finish(states)
        return self._answer(states, _shown(step.observation), 0.0, done=False)

    async def _finish(self, states: dict[str, Any]) -> dict[str, Any]:
        if self._episode_id is None:
            await self._client.aclose()
            return self._answer(states, "Submitted.", 0.0, done=True)
        result = await self._client.finish(self._episode_id)
        await self._client.aclose()
        reward, values, _ = _one(result, 0.0)
        return self._answer(states, "Submitted.", reward, done=True, values=values)

    async def _give_up(self, states: dict[str, Any], reason: str) -> dict[str, Any]:
        if self._episode_id is None:  # before its first command: no episode was opened
            await self._client.aclose()
            reward = self._task.policy.give_up_reward if self._task is not None else 0.0
            return self._answer(states, "Given up.", reward, done=True)
        result = await self._client.give_up(self._episode_id, reason.strip()[:4096])
        await self._client.aclose()
        reward, values, _ = _one(result, 0.0)
        return self._answer(states, "Given up.", reward, done=True, values=values)

    def _answer(
        self,
        states: dict[str, Any],
        output: str,
        reward: float,
        *,
        done: bool,
        infra: bool = False,
        values: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        logs = values or dict.fromkeys(EXTRA_LOG_KEYS, 0.0)
        if infra:
            logs["infra_error"] = 1.0
        return {
            "rewards": _Scalar(reward),
            "scores": _Scalar(min(max(reward, 0.0), 1.0)),
            "environment_feedback": "" if done else self._feedback.format(output=output),
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": logs,
        }


def _shown(observation: Observation) -> str:
    text = observation.output + observation.stderr
    if observation.timed_out:
        return text + "\n[timed out]"
    if observation.exit_code not in (0, None):
        return text + f"\n[exit code {observation.exit_code}]"
    return text
