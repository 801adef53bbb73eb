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

Verdicts are cached by a hash of model + prompt (Redis when given, else an in-process LRU),
and every review is counted and timed in Prometheus.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import httpx
from prometheus_client import Counter, Histogram

from proctor.models import (
    Action,
    Decision,
    Evidence,
    EvidenceSource,
    ScreenVerdict,
    Step,
    TaskContext,
)
from workers.anticheat.judge_prompt import (
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

if TYPE_CHECKING:
    import redis

__all__ = [
    "CACHE_PREFIX",
    "JUDGE_CALLS",
    "JUDGE_LATENCY",
    "FailurePolicy",
    "Judge",
    "JudgeOutcome",
    "JudgeSettings",
    "JudgeStatus",
    "JudgeVerdict",
    "ResponseFormat",
]

logger = logging.getLogger(__name__)

CACHE_PREFIX = "proctor:judge:"
MAX_RESPONSE_BYTES = 1024 * 1024  # a chat completion of one verdict is a few hundred bytes
BREAKER_FAILURES = 3  # consecutive failed reviews that open the circuit
BREAKER_OPEN_S = 30.0  # how long an open circuit answers `unavailable` without asking
_SERVER_FAILURES = frozenset({"timeout", "unreachable", "http_error", "bad_response"})

JUDGE_CALLS = Counter(
    "proctor_judge_calls_total",
    "Judge reviews by outcome (cache_hit and skipped never reach the model server).",
    ["outcome"],
)
JUDGE_LATENCY = Histogram(
    "proctor_judge_latency_seconds",
    "Wall time of judge reviews that went to the model server, repair included.",
    ["kind"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0),
)


class FailurePolicy(StrEnum):
    fail_open = "fail_open"  # no verdict: allow, and say so in the result
    fail_closed = "fail_closed"  # no verdict: intercept


class ResponseFormat(StrEnum):
    auto = "auto"  # json_schema, then json_object+schema, then none, as the server accepts
    json_schema = "json_schema"  # OpenAI structured outputs (OpenAI, vLLM, SGLang, Ollama)
    json_object = "json_object"  # {"type": "json_object", "schema": ...} (llama-cpp-python)
    none = "none"  # plain text; the parser and the repair retry do all the work


def _env(environ: Mapping[str, str], name: str, default: str) -> str:
    return environ.get(f"PROCTOR_JUDGE_{name}", default).strip()


def _env_number(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = _env(environ, name, "")
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"PROCTOR_JUDGE_{name}={raw!r} is not a number") from None


@dataclass(frozen=True)
class JudgeSettings:
    """Where the judge is and how far to trust and wait for it. `url` is the OpenAI-style
    base URL with its version, e.g. `http://127.0.0.1:8081/v1`; empty disables the judge."""

    url: str = ""
    model: str = ""  # empty: the first model the server lists
    api_key: str = ""
    timeout_s: float = 30.0  # a whole review of a trajectory, repair included
    max_concurrency: int = 4  # requests in flight from this process
    threshold: float = 0.7  # a cheat verdict at or above this confidence intercepts
    failure_policy: FailurePolicy = FailurePolicy.fail_open
    action_budget_s: float = 5.0  # a whole review of one action, repair included
    response_format: ResponseFormat = ResponseFormat.auto
    cache_ttl_s: int = 7 * 24 * 3600
    # the whole prompt, in characters: 7000 leave room for the answer in a 4k-token context
    # even for code at 2 characters a token; raise it for a judge with a long context
    max_prompt_chars: int = 7_000
    max_tokens: int = 256

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError("judge threshold must be within 0..1")
        if self.timeout_s <= 0 or self.action_budget_s <= 0:
            raise ValueError("judge timeouts must be positive")
        if self.max_concurrency < 1:
            raise ValueError("judge max_concurrency must be at least 1")

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeSettings:
        """Read PROCTOR_JUDGE_* (URL, MODEL, API_KEY, TIMEOUT_S, MAX_CONCURRENCY, THRESHOLD,
        FAILURE_POLICY, ACTION_BUDGET_S, RESPONSE_FORMAT, CACHE_TTL_S, MAX_PROMPT_CHARS)."""
        env = os.environ if environ is None else environ
        d = cls()
        try:
            policy = FailurePolicy(_env(env, "FAILURE_POLICY", d.failure_policy.value))
            fmt = ResponseFormat(_env(env, "RESPONSE_FORMAT", d.response_format.value))
        except ValueError as exc:
            raise ValueError(f"PROCTOR_JUDGE_*: {exc}") from None
        return cls(
            url=_env(env, "URL", "").rstrip("/"),
            model=_env(env, "MODEL", ""),
            api_key=_env(env, "API_KEY", ""),
            timeout_s=_env_number(env, "TIMEOUT_S", d.timeout_s),
            max_concurrency=int(_env_number(env, "MAX_CONCURRENCY", d.max_concurrency)),
            threshold=_env_number(env, "THRESHOLD", d.threshold),
            failure_policy=policy,
            action_budget_s=_env_number(env, "ACTION_BUDGET_S", d.action_budget_s),
            response_format=fmt,
            cache_ttl_s=int(_env_number(env, "CACHE_TTL_S", d.cache_ttl_s)),
            max_prompt_chars=int(_env_number(env, "MAX_PROMPT_CHARS", d.max_prompt_chars)),
        )


class JudgeStatus(StrEnum):
    verdict = "verdict"
    unavailable = "unavailable"
    skipped = "skipped"


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

    @property
    def cheat(self) -> bool:
        """A verdict of cheating at or above the threshold: evidence, not a policy default."""
        return self.status is JudgeStatus.verdict and self.decision is Decision.intercept

    def evidence(self, step: int | None = None) -> Evidence | None:
        if not self.cheat or self.verdict is None:
            return None
        return Evidence(
            source=EvidenceSource.judge,
            category=self.verdict.category,
            detail=f"{self.verdict.rationale} (confidence {self.verdict.confidence:.2f})",
            step=step,
        )

    def screen_verdict(self, rule: ScreenVerdict | None = None) -> ScreenVerdict:
        """The rule filter's `review` verdict, resolved by this outcome."""
        category = self.verdict.category if self.cheat and self.verdict else None
        return ScreenVerdict(
            decision=self.decision,
            rule=rule.rule if rule else None,
            category=category or (rule.category if rule else None),
            reason=f"judge {self.status.value}: {self.reason}"[:1000],
        )


class JudgeUnavailable(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# ------------------------------------------------------------------------------ cache


class _VerdictCache:
    """Redis when it answers, an in-process LRU always: a cache outage costs judge calls,
    never a review. After a Redis error the cache leaves Redis alone for a while, because a
    client's connect retries could otherwise eat every action's latency budget."""

    def __init__(
        self,
        client: redis.Redis | None,
        ttl_s: int,
        max_entries: int = 4096,
        backoff_s: float = 30.0,
    ) -> None:
        self._redis = client
        self._ttl_s = ttl_s
        self._max = max_entries
        self._backoff_s = backoff_s
        self._redis_down_until = 0.0
        self._lru: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()

    def _redis_usable(self) -> redis.Redis | None:
        if self._redis is None or time.monotonic() < self._redis_down_until:
            return None
        return self._redis

    def _redis_failed(self, what: str, exc: Exception) -> None:
        self._redis_down_until = time.monotonic() + self._backoff_s
        logger.warning(
            "judge cache %s failed; memory only for %.0fs: %s", what, self._backoff_s, exc
        )

    def get(self, key: str) -> JudgeVerdict | None:
        with self._lock:
            hit = self._lru.get(key)
            if hit is not None and hit[0] > time.monotonic():
                self._lru.move_to_end(key)
                return JudgeVerdict.model_validate_json(hit[1])
        client = self._redis_usable()
        if client is None:
            return None
        try:
            raw = client.get(CACHE_PREFIX + key)
        except Exception as exc:  # any Redis failure: the judge itself can still answer
            self._redis_failed("read", exc)
            return None
        if raw is None:
            return None
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            verdict = JudgeVerdict.model_validate_json(text)
        except ValueError:
            logger.warning("judge cache entry %s is unreadable; ignoring it", key)
            return None
        self._remember(key, text)
        return verdict

    def put(self, key: str, verdict: JudgeVerdict) -> None:
        text = verdict.model_dump_json()
        self._remember(key, text)
        client = self._redis_usable()
        if client is None:
            return
        try:
            client.set(CACHE_PREFIX + key, text, ex=self._ttl_s)
        except Exception as exc:
            self._redis_failed("write", exc)

    def _remember(self, key: str, text: str) -> None:
        with self._lock:
            self._lru[key] = (time.monotonic() + self._ttl_s, text)
            self._lru.move_to_end(key)
            while len(self._lru) > self._max:
                self._lru.popitem(last=False)


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
    ) -> None:
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._http = httpx.Client(
            base_url=settings.url or "http://judge.invalid",
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_connections=settings.max_concurrency),
        )
        self._slots = threading.Semaphore(settings.max_concurrency)
        self._cache = _VerdictCache(redis_client, settings.cache_ttl_s)
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

    @property
    def model(self) -> str:
        """The model asked: the configured one, or the one the server listed ("" before)."""
        return self._model

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
        prompt = action_prompt(
            action, task_context, history, max_chars=self.settings.max_prompt_chars
        )
        budget = min(self.settings.action_budget_s, self.settings.timeout_s)
        return self._review(prompt, budget)

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
        prompt = trajectory_prompt(
            statement, solution_or_diff, steps, max_chars=self.settings.max_prompt_chars
        )
        return self._review(prompt, self.settings.timeout_s)

    # ------------------------------------------------------------------ the review

    def _policy_decision(self) -> Decision:
        if self.settings.failure_policy is FailurePolicy.fail_closed:
            return Decision.intercept
        return Decision.allow

    def _skipped(self, reason: str, decision: Decision) -> JudgeOutcome:
        JUDGE_CALLS.labels(outcome="skipped").inc()
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
                JUDGE_CALLS.labels(outcome="cache_hit").inc()
                return self._decide(prompt, cached, started, cached=True)
            if started < self._open_until:
                raise JudgeUnavailable(
                    "circuit_open",
                    f"{self._failures} reviews in a row failed; asking again in "
                    f"{self._open_until - started:.0f}s",
                )
            if not self._slots.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
                raise JudgeUnavailable("timeout", "no free judge slot within the budget")
            try:
                verdict, repaired = self._ask(model, prompt, deadline)
            finally:
                self._slots.release()
        except JudgeUnavailable as exc:
            JUDGE_CALLS.labels(outcome=exc.reason).inc()
            elapsed = time.monotonic() - started
            if exc.reason in _SERVER_FAILURES:
                JUDGE_LATENCY.labels(kind=prompt.kind).observe(elapsed)
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
            )
        self._failures = 0
        JUDGE_CALLS.labels(outcome="repaired" if repaired else "ok").inc()
        JUDGE_LATENCY.labels(kind=prompt.kind).observe(time.monotonic() - started)
        self._cache.put(key, verdict)
        return self._decide(prompt, verdict, started, cached=False, repaired=repaired)

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
