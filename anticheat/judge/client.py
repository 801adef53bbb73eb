"""The LLM judge: one OpenAI-compatible chat endpoint asked whether an action or a finished
episode is a cheat, with the answer turned into a `Decision` under a failure policy.

Any chat-completions server works (vLLM, SGLang, Ollama, llama.cpp, OpenAI). The judge never
raises to its caller and never outlives its deadline: a down, slow or babbling server is an
outcome (`unavailable`, with the reason) that the failure policy turns into allow or
intercept. Internally the reasons form one small tree:

    JudgeUnavailable            the judge could not give a verdict in time
     ├─ reason "timeout"        the deadline passed (connect, read, or waiting for a slot)
     ├─ reason "unreachable"    connection refused or reset, DNS failure
     ├─ reason "http_error"     a non-2xx answer the client cannot work around
     ├─ reason "bad_response"   a 2xx body that is not a chat completion
     ├─ reason "invalid_output" the model's text held no verdict, even after one repair
     └─ reason "circuit_open"   the last reviews all failed: not asking for a while, so a
                                hung judge costs an episode one budget, not one per action

A judge whose calibration (`calibration`) found its verdicts not worth using — or has not
yet been made, in a worker — is not asked at all: status `unused`, with the reason, and the
failure policy's decision (under fail_open, the rule's own fallback decides).

Verdicts are cached by a hash of model + prompt (`cache`), and every review is counted
through the `JudgeMetrics` it is given: in a worker, the store's Redis counters, which is
what the API's /metrics serves (`proctor_judge_calls_total{outcome}`, and for reviews that
reached the model server `proctor_judge_latency_seconds_total{kind}` over
`proctor_judge_timed_reviews_total{kind}`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from anticheat.judge.cache import CACHE_PREFIX, VerdictCache
from anticheat.judge.prompt import (
    VERDICT_SCHEMA,
    JudgeVerdict,
    Prompt,
    VerdictParseError,
    action_prompt,
    injection_floor,
    parse_verdict,
    repair_messages,
    trajectory_prompt,
)
from anticheat.judge.settings import FailurePolicy, JudgeSettings, ResponseFormat
from anticheat.judge.state import JudgeState
from proctor.models import (
    Action,
    CheatCategory,
    Decision,
    Evidence,
    EvidenceSource,
    ScreenVerdict,
    Step,
    TaskContext,
)

if TYPE_CHECKING:
    import redis

__all__ = [
    "CACHE_PREFIX",
    "FailurePolicy",
    "Judge",
    "JudgeMetrics",
    "JudgeOutcome",
    "JudgeSettings",
    "JudgeStatus",
    "JudgeVerdict",
    "ResponseFormat",
]

logger = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 1024 * 1024  # a chat completion of one verdict is a few hundred bytes
BREAKER_FAILURES = 3  # consecutive failed reviews that open the circuit
BREAKER_OPEN_S = 30.0  # how long an open circuit answers `unavailable` without asking
_SERVER_FAILURES = frozenset({"timeout", "unreachable", "http_error", "bad_response"})

CALLS = "proctor_judge_calls"  # {outcome}: ok, repaired, cache_hit, skipped, unused, or the reason
LATENCY = "proctor_judge_latency_seconds"  # {kind}: summed over reviews that reached the server
TIMED = "proctor_judge_timed_reviews"  # {kind}: how many reviews LATENCY sums


class JudgeMetrics(Protocol):
    """Where the judge counts its reviews (`core.store.EpisodeStore.count` in a worker)."""

    def count(self, name: str, amount: float = 1.0, **labels: str) -> None: ...


class JudgeStatus(StrEnum):
    verdict = "verdict"
    unavailable = "unavailable"
    skipped = "skipped"
    unused = "unused"  # asked nothing: calibration found its verdicts not worth using


@dataclass(frozen=True)
class JudgeOutcome:
    """What one review came to. `decision` is final: the verdict against the threshold, or
    the failure policy when there is no verdict. `status` goes into `CheatReport.judge`."""

    status: JudgeStatus
    decision: Decision
    verdict: JudgeVerdict | None = None
    reason: str = ""  # the rationale, or why there is no verdict
    cached: bool = False
    repaired: bool = False
    latency_s: float = 0.0
    injection: tuple[str, ...] = ()
    failure: str = ""  # unavailable: the reason's code (timeout, unreachable, …)

    def decided(self, decision: Decision) -> JudgeOutcome:
        return replace(self, decision=decision)

    @property
    def cheat(self) -> bool:
        """A verdict of cheating at or above the threshold: evidence, not a policy default."""
        return self.status is JudgeStatus.verdict and self.decision is Decision.intercept

    def evidence(self, step: int | None = None) -> Evidence | None:
        if not self.cheat or self.verdict is None:
            return None
        return Evidence(
            source=EvidenceSource.judge,
            category=CheatCategory(self.verdict.category),
            detail=f"{self.verdict.rationale} (confidence {self.verdict.confidence:.2f})",
            step=step,
            confidence=self.verdict.confidence,
        )

    @property
    def review(self) -> str:
        """One line for a step's `judge`: the status, how long it took, and what came of it
        (a verdict with its confidence, or why there is none)."""
        said = ""
        if self.verdict is not None:
            said = (
                f"{'cheat' if self.verdict.cheat else 'no cheat'} at confidence "
                f"{self.verdict.confidence:.2f}: "
            )
        return f"{self.status.value} ({self.latency_s:.2f}s): {said}{self.reason}"[:1000]

    def screen_verdict(self, rule: ScreenVerdict | None = None) -> ScreenVerdict:
        """The rule filter's `review` verdict, resolved by this outcome."""
        category = CheatCategory(self.verdict.category) if self.cheat and self.verdict else None
        confidence = f" at confidence {self.verdict.confidence:.2f}" if self.verdict else ""
        return ScreenVerdict(
            decision=self.decision,
            rule=rule.rule if rule else None,
            category=category or (rule.category if rule else None),
            reason=f"judge {self.status.value}{confidence}: {self.reason}"[:1000],
        )


class JudgeUnavailable(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# ----------------------------------------------------------------------------- client


def _response_format(fmt: ResponseFormat) -> dict[str, Any] | None:
    if fmt is ResponseFormat.json_schema:
        return {"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA}}
    if fmt is ResponseFormat.json_object:
        return {"type": "json_object", "schema": VERDICT_SCHEMA}
    return None


class Judge:
    """A sync judge client for one worker process; thread-safe, reuse one per process."""

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        redis_client: redis.Redis | None = None,
        transport: httpx.BaseTransport | None = None,
        metrics: JudgeMetrics | None = None,
    ) -> None:
        self.settings = settings
        self._metrics = metrics
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._http = httpx.Client(
            base_url=settings.url or "http://judge.invalid",
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_connections=settings.max_concurrency),
        )
        self._slots = threading.Semaphore(settings.max_concurrency)
        self._cache = VerdictCache(redis_client, settings.cache_ttl_s)
        ladder: list[ResponseFormat] = (
            [ResponseFormat.json_schema, ResponseFormat.json_object, ResponseFormat.none]
            if settings.response_format is ResponseFormat.auto
            else [settings.response_format]
        )
        self._formats = ladder  # steps down when the server refuses one; see _complete
        self._formats_lock = threading.Lock()
        self._model = settings.model
        self._failures = 0  # consecutive; updated racily, which only shifts the trip by one
        self._open_until = 0.0
        # None: trusted as it is (a library user's judge); a worker sets the calibration's
        # state before its first job, and then its verdicts count only while it is useful
        self._state: JudgeState | None = None

    @property
    def model(self) -> str:
        """The model asked: the configured one, or the one the server listed ("" before)."""
        return self._model

    @property
    def state(self) -> JudgeState | None:
        """The calibration this judge goes by (`calibration`); None: not calibrated."""
        return self._state

    def use_calibration(self, state: JudgeState) -> None:
        self._state = state

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------- public API

    def review_action(
        self,
        action: Action,
        task_context: TaskContext | None = None,
        history: Sequence[Action | Step] = (),
        *,
        enabled: bool = True,
    ) -> JudgeOutcome:
        """Judge one action the rule filter marked `review`, within the action budget.

        `enabled=False` (the task's `policy.judge`) skips and allows: the trainer opted out.
        With no judge configured, the failure policy decides, as for a judge that is down.
        """
        if not enabled:
            return self._skipped("judge disabled by the task's policy", Decision.allow)
        if not self.settings.enabled:
            return self._skipped("no judge configured", self._policy_decision())
        if (unused := self._unused()) is not None:
            return unused
        prompt = action_prompt(
            action, task_context, history, max_chars=self.settings.max_prompt_chars
        )
        budget = min(self.settings.action_budget_s, self.settings.timeout_s)
        return self._review(prompt, budget)

    def probe(self, action: Action, task_context: TaskContext) -> JudgeOutcome:
        """One calibration question: asked whatever the calibration or the circuit says,
        never answered from the cache nor counted as a review, within `timeout_s` (how
        well it judges is measured here, not how fast)."""
        prompt = action_prompt(action, task_context, max_chars=self.settings.max_prompt_chars)
        started = time.monotonic()
        deadline = started + self.settings.timeout_s
        try:
            model = self._resolve_model(deadline)
            verdict, repaired = self._ask_in_a_slot(model, prompt, deadline)
        except JudgeUnavailable as exc:
            return JudgeOutcome(
                status=JudgeStatus.unavailable,
                decision=self._policy_decision(),
                reason=str(exc)[:1000],
                latency_s=time.monotonic() - started,
                failure=exc.reason,
            )
        return self._decide(prompt, verdict, started, cached=False, repaired=repaired)

    def review_trajectory(
        self,
        statement: str | None,
        solution_or_diff: str,
        steps: Sequence[Action | Step] = (),
        *,
        enabled: bool = True,
    ) -> JudgeOutcome:
        """Judge a finished episode (or a one-shot solution) without its test results.

        `outcome.cheat` is the evidence that makes the episode `verdict: cheat`. When there
        is no verdict, `decision` is the failure policy's; under fail_closed the caller should
        treat that as an infrastructure error (reward null), not as a proven cheat.
        """
        if not (enabled and self.settings.enabled):  # no judge is no evidence of cheating
            return self._skipped("judge disabled", Decision.allow)
        if (unused := self._unused()) is not None:
            return unused.decided(Decision.allow)  # nor is a judge whose word is not used
        prompt = trajectory_prompt(
            statement, solution_or_diff, steps, max_chars=self.settings.max_prompt_chars
        )
        return self._review(prompt, self.settings.timeout_s)

    # ------------------------------------------------------------------ the review

    def _policy_decision(self) -> Decision:
        if self.settings.failure_policy is FailurePolicy.fail_closed:
            return Decision.intercept
        return Decision.allow

    def _count(self, name: str, amount: float = 1.0, **labels: str) -> None:
        if self._metrics is None:
            return
        try:
            self._metrics.count(name, amount, **labels)
        except Exception as exc:  # a counter outage must not cost a review
            logger.warning("judge metric %s not counted: %s", name, exc)

    def _timed(self, kind: str, seconds: float) -> None:
        self._count(LATENCY, seconds, kind=kind)
        self._count(TIMED, kind=kind)

    def _unused(self) -> JudgeOutcome | None:
        """The outcome of a review not asked because calibration found the judge's verdicts
        not worth using (or has not yet found them so); None when they are."""
        state = self._state
        if state is None or state.useful:
            return None
        self._count(CALLS, outcome="unused")
        return JudgeOutcome(
            status=JudgeStatus.unused,
            decision=self._policy_decision(),
            reason=f"the judge's answer is not used: {state.reason}"[:1000],
            failure="unused",
        )

    def _skipped(self, reason: str, decision: Decision) -> JudgeOutcome:
        self._count(CALLS, outcome="skipped")
        return JudgeOutcome(status=JudgeStatus.skipped, decision=decision, reason=reason)

    def _decide(
        self,
        prompt: Prompt,
        verdict: JudgeVerdict,
        started: float,
        *,
        cached: bool,
        repaired: bool = False,
    ) -> JudgeOutcome:
        verdict = injection_floor(verdict, prompt.injection, self.settings.threshold)
        intercept = verdict.cheat and verdict.confidence >= self.settings.threshold
        return JudgeOutcome(
            status=JudgeStatus.verdict,
            decision=Decision.intercept if intercept else Decision.allow,
            verdict=verdict,
            reason=verdict.rationale,
            cached=cached,
            repaired=repaired,
            latency_s=time.monotonic() - started,
            injection=tuple(prompt.injection),
        )

    def _review(self, prompt: Prompt, budget_s: float) -> JudgeOutcome:
        started = time.monotonic()
        deadline = started + budget_s
        try:
            model = self._resolve_model(deadline)
            key = hashlib.sha256(prompt.cache_material(model)).hexdigest()
            cached = self._cache.get(key)
            if cached is not None:
                self._count(CALLS, outcome="cache_hit")
                return self._decide(prompt, cached, started, cached=True)
            if started < self._open_until:
                raise JudgeUnavailable(
                    "circuit_open",
                    f"{self._failures} reviews in a row failed; asking again in "
                    f"{self._open_until - started:.0f}s",
                )
            verdict, repaired = self._ask_in_a_slot(model, prompt, deadline)
        except JudgeUnavailable as exc:
            self._count(CALLS, outcome=exc.reason)
            elapsed = time.monotonic() - started
            if exc.reason in _SERVER_FAILURES:
                self._timed(prompt.kind, elapsed)
                self._failures += 1
                if self._failures >= BREAKER_FAILURES:
                    self._open_until = time.monotonic() + BREAKER_OPEN_S
            logger.warning(
                "judge unavailable for a %s review after %.2fs: %s", prompt.kind, elapsed, exc
            )
            return JudgeOutcome(
                status=JudgeStatus.unavailable,
                decision=self._policy_decision(),
                reason=str(exc)[:1000],
                latency_s=elapsed,
                injection=tuple(prompt.injection),
                failure=exc.reason,
            )
        self._failures = 0
        self._count(CALLS, outcome="repaired" if repaired else "ok")
        self._timed(prompt.kind, time.monotonic() - started)
        self._cache.put(key, verdict)
        return self._decide(prompt, verdict, started, cached=False, repaired=repaired)

    def _ask_in_a_slot(
        self, model: str, prompt: Prompt, deadline: float
    ) -> tuple[JudgeVerdict, bool]:
        """`_ask` once one of the judge's slots is free, within the deadline."""
        if not self._slots.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            raise JudgeUnavailable("timeout", "no free judge slot within the budget")
        try:
            return self._ask(model, prompt, deadline)
        finally:
            self._slots.release()

    def _ask(self, model: str, prompt: Prompt, deadline: float) -> tuple[JudgeVerdict, bool]:
        """One completion, and one repair completion if its text holds no verdict."""
        text = self._complete(model, prompt.messages, deadline)
        try:
            return parse_verdict(text), False
        except VerdictParseError as first:
            logger.info("judge answer unreadable (%s); asking once more", first)
            repaired = self._complete(
                model, repair_messages(prompt.messages, text, str(first)), deadline
            )
            try:
                return parse_verdict(repaired), True
            except VerdictParseError as second:
                raise JudgeUnavailable("invalid_output", str(second)) from None

    def _complete(self, model: str, messages: Sequence[Mapping[str, str]], deadline: float) -> str:
        while True:
            with self._formats_lock:
                fmt = self._formats[0]
            body: dict[str, Any] = {
                "model": model,
                "messages": list(messages),
                "temperature": 0,
                "max_tokens": self.settings.max_tokens,
                "stream": False,
            }
            response_format = _response_format(fmt)
            if response_format is not None:
                body["response_format"] = response_format
            status, payload = self._send("POST", "/chat/completions", deadline, json_body=body)
            # Servers refuse an unknown response_format in many ways (llama-cpp-python: a
            # 500 with a validation error); only an answer that names it steps down, so an
            # unrelated 400 (context too long) cannot disable structured output for good.
            rejected = (
                status >= 400
                and fmt is not ResponseFormat.none
                and any(word in payload for word in (b"response_format", b"json_schema"))
            )
            if rejected and self._step_down(fmt):
                continue  # the server cannot do this format; the next one is simpler
            if status >= 400:
                raise JudgeUnavailable("http_error", f"HTTP {status}: {payload[:200]!r}")
            return _completion_text(payload)

    def _step_down(self, rejected: ResponseFormat) -> bool:
        """Use the next simpler response_format; False when there is none left to try."""
        with self._formats_lock:
            if self._formats[0] is rejected and len(self._formats) > 1:
                self._formats.pop(0)
                logger.info(
                    "judge refused response_format %s; using %s", rejected, self._formats[0]
                )
            return self._formats[0] is not rejected

    def _send(
        self, method: str, path: str, deadline: float, *, json_body: Any = None
    ) -> tuple[int, bytes]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise JudgeUnavailable("timeout", "the budget was spent before the request")
        timeout = httpx.Timeout(remaining, connect=min(remaining, 5.0))
        try:
            with self._http.stream(method, path, json=json_body, timeout=timeout) as response:
                chunks: list[bytes] = []
                size = 0
                # httpx times each read, not the whole body: check the deadline between
                # chunks so a server that trickles bytes cannot hold the episode
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise JudgeUnavailable("bad_response", "response larger than 1 MiB")
                    if time.monotonic() > deadline:
                        raise JudgeUnavailable("timeout", "the response outlived the budget")
                    chunks.append(chunk)
                return response.status_code, b"".join(chunks)
        except httpx.TimeoutException as exc:
            raise JudgeUnavailable(
                "timeout", f"{type(exc).__name__} after {remaining:.2f}s"
            ) from None
        except httpx.TransportError as exc:
            raise JudgeUnavailable("unreachable", f"{type(exc).__name__}: {exc}") from None

    def _resolve_model(self, deadline: float) -> str:
        """The configured model, or the first one the server lists (llama.cpp, one-model
        vLLM): development setups then need nothing but a URL."""
        if self._model:
            return self._model
        # no lock: threads racing here all store the same name, and none waits on another
        status, payload = self._send("GET", "/models", deadline)
        if status >= 400:
            raise JudgeUnavailable("http_error", f"GET /models: HTTP {status}")
        try:
            self._model = str(json.loads(payload)["data"][0]["id"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise JudgeUnavailable("bad_response", "GET /models lists no model") from None
        return self._model


def _completion_text(payload: bytes) -> str:
    try:
        data = json.loads(payload)
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise JudgeUnavailable(
            "bad_response", f"not a chat completion: {payload[:200]!r}"
        ) from None
    if not isinstance(content, str):
        raise JudgeUnavailable("invalid_output", "the completion has no text content")
    return content
