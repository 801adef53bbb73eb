"""The judge's settings: its PROCTOR_JUDGE_* variables, read through the one `Settings`."""

from __future__ import annotations

import pytest

from anticheat.judge.settings import FailurePolicy, JudgeSettings, ResponseFormat
from core.config import Settings

# ------------------------------------------------------------------------- settings


def from_env(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> JudgeSettings:
    """The judge's settings as a process reads them: PROCTOR_JUDGE_* through `Settings`."""
    for name in Settings.model_fields:
        monkeypatch.delenv(f"PROCTOR_{name.upper()}", raising=False)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    return JudgeSettings.from_settings(Settings())


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = from_env(
        {
            "PROCTOR_JUDGE_URL": "http://vllm:8000/v1/",
            "PROCTOR_JUDGE_MODEL": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "PROCTOR_JUDGE_API_KEY": "k",
            "PROCTOR_JUDGE_TIMEOUT_S": "12.5",
            "PROCTOR_JUDGE_MAX_CONCURRENCY": "16",
            "PROCTOR_JUDGE_THRESHOLD": "0.85",
            "PROCTOR_JUDGE_FAILURE_POLICY": "fail_closed",
            "PROCTOR_JUDGE_ACTION_BUDGET_S": "1.5",
            "PROCTOR_JUDGE_RESPONSE_FORMAT": "json_object",
        },
        monkeypatch,
    )
    assert settings == JudgeSettings(
        url="http://vllm:8000/v1",
        model="Qwen/Qwen2.5-Coder-7B-Instruct",
        api_key="k",
        timeout_s=12.5,
        max_concurrency=16,
        threshold=0.85,
        failure_policy=FailurePolicy.fail_closed,
        action_budget_s=1.5,
        response_format=ResponseFormat.json_object,
    )
    assert settings.enabled and not from_env({}, monkeypatch).enabled


@pytest.mark.parametrize(
    "env",
    [
        {"PROCTOR_JUDGE_THRESHOLD": "1.5"},
        {"PROCTOR_JUDGE_FAILURE_POLICY": "maybe"},
        {"PROCTOR_JUDGE_TIMEOUT_S": "soon"},
        {"PROCTOR_JUDGE_MAX_CONCURRENCY": "0"},
    ],
)
def test_bad_settings_are_refused(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"judge|PROCTOR_JUDGE"):
        from_env(env, monkeypatch)
