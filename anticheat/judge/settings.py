"""Where the judge is and how far to trust and wait for it: its part of the one `Settings`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from core import defaults
from core.config import Settings

__all__ = ["FailurePolicy", "JudgeSettings", "ResponseFormat"]


class FailurePolicy(StrEnum):
    fail_open = "fail_open"  # no verdict: allow, and say so in the result
    fail_closed = "fail_closed"  # no verdict: intercept


class ResponseFormat(StrEnum):
    auto = "auto"  # json_schema, then json_object+schema, then none, as the server accepts
    json_schema = "json_schema"  # OpenAI structured outputs (OpenAI, vLLM, SGLang, Ollama)
    json_object = "json_object"  # {"type": "json_object", "schema": ...} (llama-cpp-python)
    none = "none"  # plain text; the parser and the repair retry do all the work


DEFAULT_FAILURE_POLICY = FailurePolicy(defaults.JUDGE_FAILURE_POLICY)
DEFAULT_RESPONSE_FORMAT = ResponseFormat(defaults.JUDGE_RESPONSE_FORMAT)


@dataclass(frozen=True)
class JudgeSettings:
    """Where the judge is and how far to trust and wait for it. `url` is the OpenAI-style
    base URL with its version, e.g. `http://127.0.0.1:8081/v1`; empty disables the judge."""

    # each default is core/defaults.py's, which says what it is
    url: str = defaults.JUDGE_URL
    model: str = defaults.JUDGE_MODEL
    api_key: str = defaults.JUDGE_API_KEY
    timeout_s: float = defaults.JUDGE_TIMEOUT_S
    max_concurrency: int = defaults.JUDGE_MAX_CONCURRENCY  # from this process
    threshold: float = defaults.JUDGE_THRESHOLD
    failure_policy: FailurePolicy = DEFAULT_FAILURE_POLICY
    action_budget_s: float = defaults.JUDGE_ACTION_BUDGET_S
    response_format: ResponseFormat = DEFAULT_RESPONSE_FORMAT
    cache_ttl_s: int = defaults.JUDGE_CACHE_TTL_S
    max_prompt_chars: int = defaults.JUDGE_MAX_PROMPT_CHARS
    max_tokens: int = defaults.JUDGE_MAX_TOKENS
    calibration_interval_s: float = defaults.JUDGE_CALIBRATION_INTERVAL_S

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
    def from_settings(cls, settings: Settings) -> JudgeSettings:
        """The judge's part of the one `Settings` (PROCTOR_JUDGE_URL, _MODEL, _API_KEY,
        _TIMEOUT_S, _MAX_CONCURRENCY, _THRESHOLD, _FAILURE_POLICY, _ACTION_BUDGET_S,
        _RESPONSE_FORMAT, _CACHE_TTL_S, _MAX_PROMPT_CHARS, _CALIBRATION_INTERVAL_S)."""
        return cls(
            url=settings.judge_url.strip().rstrip("/"),
            model=settings.judge_model.strip(),
            api_key=settings.judge_api_key.strip(),
            timeout_s=settings.judge_timeout_s,
            max_concurrency=settings.judge_max_concurrency,
            threshold=settings.judge_threshold,
            failure_policy=FailurePolicy(settings.judge_failure_policy),
            action_budget_s=settings.judge_action_budget_s,
            response_format=ResponseFormat(settings.judge_response_format),
            cache_ttl_s=settings.judge_cache_ttl_s,
            max_prompt_chars=settings.judge_max_prompt_chars,
            calibration_interval_s=settings.judge_calibration_interval_s,
        )
