"""A result keeps whatever text its sandbox put in it, stored: a lone surrogate (a file name's
byte that is not UTF-8 as Python names it, or an escape the code under test wrote in its
completion record) has no UTF-8, and is stored (and answered to the API) as U+FFFD instead
of failing the episode."""

from __future__ import annotations

import json

import pytest
import redis

from core.store import EpisodeStore, dump_json
from proctor.models import (
    EpisodeCreate,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
    Observation,
    Step,
    TestCase,
    TestOutcome,
    Verdict,
)


def test_text_without_surrogates_is_dumped_as_pydantic_dumps_it() -> None:
    case = TestCase(name="tests/test_é.py", outcome=TestOutcome.passed, message="\x00\x01")
    assert dump_json(case) == case.model_dump_json()


def test_lone_surrogates_are_stored_as_replacement_characters() -> None:
    case = TestCase(name="a\udcffb", outcome=TestOutcome.failed, message="\ud83d\ude00")
    assert json.loads(dump_json(case)) == {
        "name": "a\ufffdb",
        "outcome": "failed",
        "duration_s": 0.0,
        "message": "\ufffd\ufffd",
        "verdict": None,
    }


def test_a_step_with_a_surrogate_deep_inside_is_stored() -> None:
    step = Step(
        step=1,
        action={"type": "bash", "command": "ls"},
        observation=Observation(output="\udcff.py\n", stderr="x"),
    )
    stored = Step.model_validate_json(dump_json(step))
    assert stored.observation.output == "\ufffd.py\n" and stored.action == step.action


@pytest.mark.redis
def test_an_answer_with_a_lone_surrogate_reaches_the_api_as_utf8(
    quiet_redis: redis.Redis,
) -> None:
    store = EpisodeStore(quiet_redis)
    body = {"output": "\udcff.py", "nested": [{"name": "ok \U0001f600"}]}
    store.reply("reply:t", body=body, message="\ud800")
    answer = json.loads(quiet_redis.lpop("reply:t"))  # type: ignore[arg-type]
    assert answer["body"] == {"output": "\ufffd.py", "nested": [{"name": "ok \U0001f600"}]}
    assert answer["message"] == "\ufffd"
    json.dumps(answer, ensure_ascii=False).encode()  # what the API sends


@pytest.mark.redis
def test_a_result_with_a_lone_surrogate_is_stored_and_read_back(
    quiet_redis: redis.Redis,
) -> None:
    store = EpisodeStore(quiet_redis)
    request = EpisodeCreate.model_validate(
        {"task": {"tests": {"files": {"t.py": "assert 1"}}}, "solution": {"files": {}}}
    )
    admission = store.create([request], dedup_keys=[None], max_queued=100, dedup_ttl_s=60)
    episode_id = admission.ids[0]
    ended = EpisodeResult(
        id=episode_id,
        status=EpisodeStatus.completed,
        mode=EpisodeMode.oneshot,
        verdict=Verdict.failed,
        reward=0.0,
        reason="\udcff.py raised E\ud800",
        tests=[TestCase(name="\udcff.py", outcome=TestOutcome.failed)],
    )
    assert store.finish(ended)
    record = store.get(episode_id)
    assert record is not None and record.result is not None
    assert record.result.reason == "\ufffd.py raised E\ufffd"
    assert record.result.tests[0].name == "\ufffd.py"
