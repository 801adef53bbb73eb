"""The HTTP surface: validation, auth, batches, cancel, health, metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import redis

from core import keys
from core.defaults import MAX_SHUT_S
from tests.conftest import (
    claimed_database,
    running_api,
)
from tests.e2e.helpers import episode, run

ADD = "def add(a, b):\n    return a + b\n"


def queued(redis_url: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.llen("rq:queue:proctor"))
    finally:
        client.close()


BAD_BODIES: list[tuple[str, Any, str]] = [
    ("malformed JSON", b"{not json", "JSON"),
    ("unknown field", {**episode(ADD), "colour": "red"}, "colour"),
    (
        "unknown image",
        {**episode(ADD), "task": {**episode(ADD)["task"], "image": "cobol"}},
        "unknown image",
    ),
    ("path traversal", {**episode(ADD), "solution": {"files": {"../evil.py": "x"}}}, "leaves"),
    ("absolute path", {**episode(ADD), "solution": {"files": {"/etc/x": "x"}}}, "absolute"),
    ("negative timeout", episode(ADD, timeout_s=-5), "timeout_s"),
    ("huge memory", episode(ADD, memory_mb=10**7), "memory_mb"),
    ("huge timeout", episode(ADD, timeout_s=10**6), "timeout_s"),
    ("no solution", {"task": episode(ADD)["task"]}, "needs a solution"),
]


@pytest.mark.parametrize(("name", "body", "message"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_requests_are_refused_and_nothing_is_queued(
    http: httpx.Client, redis_url: str, name: str, body: Any, message: str
) -> None:
    before = queued(redis_url)
    if isinstance(body, bytes):
        response = http.post(
            "/v1/episodes", content=body, headers={"content-type": "application/json"}
        )
    else:
        response = http.post("/v1/episodes", json=body)
    assert 400 <= response.status_code < 500, (name, response.text)
    assert message.lower() in response.text.lower(), response.text
    assert queued(redis_url) == before


def test_oversized_body_is_413(http: httpx.Client) -> None:
    big = episode(ADD)
    big["solution"]["files"] = {f"f{i}.py": "x" * 4_000_000 for i in range(10)}
    response = http.post("/v1/episodes", json=big)
    assert response.status_code == 413
    # streamed, with no length declared: counted as it is read (the door reads it first)
    chunks = (b"x" * 1_000_000 for _ in range(50))
    headers = {"content-type": "application/json"}
    streamed = http.post("/v1/episodes", content=chunks, headers=headers)
    assert streamed.status_code == 413


def test_wait_zero_answers_202_then_get_waits(http: httpx.Client) -> None:
    response = http.post("/v1/episodes", json=episode(ADD))
    assert response.status_code == 202
    episode_id = response.json()["id"]
    result = http.get(f"/v1/episodes/{episode_id}", params={"wait": 60}).json()
    assert result["status"] == "completed" and result["reward"] == 1.0


def test_wait_out_of_range_is_refused(http: httpx.Client) -> None:
    assert http.post("/v1/episodes", params={"wait": 301}, json=episode(ADD)).status_code == 422
    assert http.post("/v1/episodes", params={"wait": -1}, json=episode(ADD)).status_code == 422


def test_batch_creates_all_in_order(http: httpx.Client) -> None:
    good, bad = ADD, "def add(a, b):\n    return 0\n"
    response = http.post(
        "/v1/episodes/batch", json={"episodes": [episode(good), episode(bad), episode(good)]}
    )
    assert response.status_code == 202
    ids = response.json()["ids"]
    rewards = [http.get(f"/v1/episodes/{i}", params={"wait": 60}).json()["reward"] for i in ids]
    assert rewards == [1.0, 0.0, 1.0]


def test_results_of_a_batch_come_in_one_request_once_all_ended(http: httpx.Client) -> None:
    good, bad = ADD, "def add(a, b):\n    return 1\n"
    ids = http.post(
        "/v1/episodes/batch", json={"episodes": [episode(good), episode(bad), episode(good)]}
    ).json()["ids"]
    asked = [*ids, "ep_unknown", ids[0]]  # an id twice is answered once
    response = http.post("/v1/episodes/results", params={"wait": 60}, json={"ids": asked})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert [r["id"] for r in answer["results"]] == list(dict.fromkeys(ids))
    assert [r["reward"] for r in answer["results"]][:2] == [1.0, 0.0]
    assert answer["pending"] == [] and answer["unknown"] == ["ep_unknown"]
    # each result is what GET shows
    assert answer["results"][1] == http.get(f"/v1/episodes/{ids[1]}").json()


@pytest.mark.parametrize(
    "body", [{"ids": []}, {"ids": [""]}, {"ids": "ep_1"}, {"ids": ["x" * 200]}, {}]
)
def test_results_of_no_ids_or_bad_ids_are_refused(http: httpx.Client, body: Any) -> None:
    assert http.post("/v1/episodes/results", json=body).status_code == 422


def test_batch_with_one_bad_episode_queues_nothing(http: httpx.Client, redis_url: str) -> None:
    before = queued(redis_url)
    bad = {**episode(ADD), "task": {**episode(ADD)["task"], "image": "cobol"}}
    response = http.post("/v1/episodes/batch", json={"episodes": [episode(ADD), bad]})
    assert response.status_code == 422
    assert queued(redis_url) == before


def test_identical_requests_without_a_key_are_two_runs(http: httpx.Client) -> None:
    # two samples that happen to be equal are two samples: each its own sandbox and run
    body = episode("def add(a, b):\n    return a + b  # two samples\n")
    first = http.post("/v1/episodes", json=body).json()["id"]
    second = http.post("/v1/episodes", params={"wait": 60}, json=body).json()
    assert second["id"] != first and second["reward"] == 1.0
    assert http.get(f"/v1/episodes/{first}", params={"wait": 60}).json()["reward"] == 1.0


def test_a_retry_with_the_same_key_is_one_run(http: httpx.Client) -> None:
    body = episode("def add(a, b):\n    return a + b  # retried\n")
    key = {"Idempotency-Key": f"call-{time.time_ns()}"}
    first = http.post("/v1/episodes", json=body, headers=key).json()["id"]
    retry = http.post("/v1/episodes", params={"wait": 60}, json=body, headers=key).json()
    assert retry["id"] == first and retry["reward"] == 1.0
    # the key in the body is the same key
    in_body = {**body, "idempotency_key": key["Idempotency-Key"]}
    assert http.post("/v1/episodes", json=in_body).json()["id"] == first
    # the same key on a different request is not that request's answer: a run of its own
    other = {**body, "metadata": {"sample": "2"}}
    assert http.post("/v1/episodes", json=other, headers=key).json()["id"] != first
    # a batch's key names the call: its equal episodes run apart, its retry gets them back
    batch = {"episodes": [body, body]}
    ids = http.post("/v1/episodes/batch", json=batch, headers=key).json()["ids"]
    assert len(set(ids)) == 2 and first not in ids
    assert http.post("/v1/episodes/batch", json=batch, headers=key).json()["ids"] == ids


def test_identical_requests_that_ask_for_it_share_one_episode(http: httpx.Client) -> None:
    body = {**episode("def add(a, b):\n    return a + b  # dedup\n"), "share_identical": True}
    first = http.post("/v1/episodes", json=body).json()["id"]
    retry = http.post("/v1/episodes", params={"wait": 60}, json=body).json()
    assert retry["id"] == first and retry["reward"] == 1.0
    other = {**body, "metadata": {"sample": "2"}}
    assert http.post("/v1/episodes", json=other).json()["id"] != first


def test_cancel(http: httpx.Client) -> None:
    slow = episode(ADD, tests="import time\n\ndef test_slow():\n    time.sleep(20)\n", timeout_s=30)
    episode_id = http.post("/v1/episodes", json=slow).json()["id"]
    cancelled = http.delete(f"/v1/episodes/{episode_id}")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["reward"] is None
    assert http.get(f"/v1/episodes/{episode_id}").json()["status"] == "cancelled"
    assert http.delete(f"/v1/episodes/{episode_id}").status_code == 409
    assert http.delete("/v1/episodes/ep_unknown").status_code == 404
    assert http.get("/v1/episodes/ep_unknown").status_code == 404


def test_health_readiness_and_metrics(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["workers"] >= 1
    assert ready.json()["checks"]["judge"]["configured"] is False  # none in this deployment
    run(http, episode(ADD))
    text = http.get("/metrics").text
    assert 'proctor_episodes_total{verdict="passed"}' in text
    assert "proctor_queue_depth" in text
    assert "proctor_episode_total_seconds_bucket" in text


@pytest.fixture(scope="module")
def api_with_tokens(redis_url: str) -> Iterator[str]:
    """An API process (no workers) that requires a bearer token."""
    with running_api(redis_url, PROCTOR_API_TOKENS="s3cret,other") as url:
        yield url


@contextmanager
def api_alone(**settings: str) -> Iterator[tuple[str, str]]:
    """An API process on a database of its own, with no workers and no dedup: its URL and
    its Redis's."""
    with (
        claimed_database() as redis_url,
        running_api(redis_url, PROCTOR_DEDUP_TTL_S="0", **settings) as url,
    ):
        yield url, redis_url


@pytest.fixture(scope="module")
def api_with_small_queue() -> Iterator[tuple[str, str]]:
    """A queue bound of 1."""
    with api_alone(PROCTOR_MAX_QUEUE_DEPTH="1") as api:
        yield api


def test_a_full_queue_answers_429_with_retry_after(api_with_small_queue: tuple[str, str]) -> None:
    url, redis_url = api_with_small_queue
    assert httpx.post(f"{url}/v1/episodes", json=episode(ADD)).status_code == 202
    response = httpx.post(f"{url}/v1/episodes", json=episode(ADD, timeout_s=5))
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0
    assert queued(redis_url) == 1


@pytest.fixture(scope="module")
def api_with_wait_bound() -> Iterator[tuple[str, str]]:
    """A refusal past 1 s of estimated waiting."""
    with api_alone(PROCTOR_MAX_QUEUE_WAIT_S="1") as api:
        yield api


def test_past_the_wait_bound_the_answer_is_429_with_retry_after(
    api_with_wait_bound: tuple[str, str],
) -> None:
    url, redis_url = api_with_wait_bound
    with redis.Redis.from_url(redis_url) as client:  # one worker, 600 ms an episode
        client.zadd(keys.WORKERS, {"worker-1": time.time()})
        client.hset(keys.PACE, "busy", "0.6")
    accepted = httpx.post(f"{url}/v1/episodes/batch", json={"episodes": [episode(ADD)] * 2})
    assert accepted.status_code == 202, accepted.text  # nothing ahead of its first
    refused = httpx.post(f"{url}/v1/episodes", json=episode(ADD, timeout_s=5))
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert "1.2 s of waiting" in refused.json()["error"]["message"]
    assert queued(redis_url) == 2
    # a refusal shuts the door while the queue drains to where one more would pass (at most
    # MAX_SHUT_S): a 429 then comes before the body is even validated, without Redis
    with redis.Redis.from_url(redis_url) as client:
        client.hset(keys.PACE, "busy", "1.0")  # slower now: 2 s before a new one starts
    time.sleep(0.3)  # the first refusal's 0.2 s have passed
    assert httpx.post(f"{url}/v1/episodes", json=episode(ADD)).status_code == 429
    shut = httpx.post(f"{url}/v1/episodes", json={"task": "not a task"})
    assert shut.status_code == 429 and "over its bound" in shut.json()["error"]["message"]
    time.sleep(MAX_SHUT_S)
    # the door opens to one request at a time until Redis answers: this one, refused for
    # its body before Redis was asked, leaves it open to the next
    assert httpx.post(f"{url}/v1/episodes", json={"task": "not a task"}).status_code == 422
    assert httpx.post(f"{url}/v1/episodes", json={"task": "not a task"}).status_code == 422


def test_the_shut_door_answers_only_clients_with_a_valid_token() -> None:
    """While the door is shut (`service.door`), a request without a valid token still gets
    its 401, and one with a valid token its 429, on both routes that queue episodes."""
    with api_alone(PROCTOR_MAX_QUEUE_WAIT_S="1", PROCTOR_API_TOKENS="s3cret") as (url, redis_url):
        with redis.Redis.from_url(redis_url) as client:  # one worker, 3 s an episode
            client.zadd(keys.WORKERS, {"worker-1": time.time()})
            client.hset(keys.PACE, "busy", "3.0")
        token = {"Authorization": "Bearer s3cret"}
        assert httpx.post(f"{url}/v1/episodes", json=episode(ADD), headers=token).is_success
        second = episode(ADD, timeout_s=5)
        refused = httpx.post(f"{url}/v1/episodes", json=second, headers=token)
        assert refused.status_code == 429, refused.text  # 3 s of waiting: the door shuts
        for path, body in (("/v1/episodes", {"task": "x"}), ("/v1/episodes/batch", {})):
            assert httpx.post(f"{url}{path}", json=body).status_code == 401
            wrong = {"Authorization": "Bearer wrong"}
            assert httpx.post(f"{url}{path}", json=body, headers=wrong).status_code == 401
            shut = httpx.post(f"{url}{path}", json=body, headers=token)
            assert shut.status_code == 429, shut.text
            assert shut.json()["error"]["type"] == "Overloaded"
            assert "over its bound" in shut.json()["error"]["message"]
            assert int(shut.headers["Retry-After"]) >= 1
        assert queued(redis_url) == 1


def test_auth_is_enforced_when_tokens_are_configured(api_with_tokens: str) -> None:
    url = f"{api_with_tokens}/v1/episodes/ep_x"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer s3cret"}).status_code == 404
    assert httpx.get(url, headers={"Authorization": "Bearer other"}).status_code == 404
    assert httpx.get(f"{api_with_tokens}/healthz").status_code == 200


def test_no_auth_in_the_local_default(http: httpx.Client) -> None:
    assert http.get("/v1/episodes/ep_x").status_code == 404


def test_a_body_that_is_not_utf8_is_a_400_in_the_error_envelope(http: httpx.Client) -> None:
    response = http.post(
        "/v1/episodes",
        content=b'{"task": "\xff\xfe"}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error"} and response.json()["error"]["type"] == "BadRequest"


@pytest.fixture(scope="module")
def api_without_workers() -> Iterator[tuple[str, str]]:
    """An API process on a database of its own, no workers, waits cut to 1 s."""
    with (
        claimed_database() as redis_url,
        running_api(redis_url, PROCTOR_MAX_WAIT_S="1", PROCTOR_DEDUP_TTL_S="0") as url,
    ):
        yield url, redis_url


def test_max_wait_caps_get_as_it_caps_post(api_without_workers: tuple[str, str]) -> None:
    url, _ = api_without_workers
    episode_id = httpx.post(f"{url}/v1/episodes", json=episode(ADD)).json()["id"]
    started = time.monotonic()
    response = httpx.get(f"{url}/v1/episodes/{episode_id}", params={"wait": 20}, timeout=30)
    assert time.monotonic() - started < 5
    assert response.status_code == 200 and response.json()["status"] == "queued"


def test_max_wait_caps_results_and_what_runs_is_pending(
    api_without_workers: tuple[str, str],
) -> None:
    url, _ = api_without_workers
    episode_id = httpx.post(f"{url}/v1/episodes", json=episode(ADD)).json()["id"]
    started = time.monotonic()
    response = httpx.post(
        f"{url}/v1/episodes/results", params={"wait": 20}, json={"ids": [episode_id]}, timeout=30
    )
    assert time.monotonic() - started < 5
    assert response.json() == {"results": [], "pending": [episode_id], "unknown": []}
    too_many = {"ids": [f"ep_{i}" for i in range(1001)]}  # the default PROCTOR_MAX_BATCH: 1000
    refused = httpx.post(f"{url}/v1/episodes/results", json=too_many)
    assert refused.status_code == 422 and "at most 1000" in refused.json()["error"]["message"]


def test_an_image_no_live_worker_can_run_is_refused_and_turns_readyz_red(
    api_without_workers: tuple[str, str],
) -> None:
    """Played with the store calls a worker makes (heartbeat, image report) on real Redis."""
    from core.defaults import IMAGES
    from core.store import EpisodeStore

    url, redis_url = api_without_workers
    client = redis.Redis.from_url(redis_url)
    store = EpisodeStore(client)
    try:
        # no live worker at all: accepted, as workers may be starting (/readyz says so)
        assert httpx.post(f"{url}/v1/episodes", json=episode(ADD)).status_code == 202
        store.heartbeat("host.1.2.abcd", host="host")
        store.publish_images("host.1.2.abcd", {"python": "inspect image: image not found"})
        refused = httpx.post(f"{url}/v1/episodes", json=episode(ADD))
        assert refused.status_code == 503, refused.text
        assert "'python'" in refused.json()["error"]["message"]
        assert "image not found" in refused.json()["error"]["message"]
        assert int(refused.headers["Retry-After"]) > 0
        batch = httpx.post(f"{url}/v1/episodes/batch", json={"episodes": [episode(ADD)]})
        assert batch.status_code == 503
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 503 and "'python'" in ready.json()["checks"]["reason"]
        # the image is back (and the worker runs every other image of the allowlist)
        store.heartbeat("host.1.2.abcd", host="host")
        store.publish_images("host.1.2.abcd", dict.fromkeys(IMAGES))
        assert httpx.get(f"{url}/readyz").status_code == 200
        assert httpx.post(f"{url}/v1/episodes", json=episode(ADD)).status_code == 202
    finally:
        store.forget_worker("host.1.2.abcd")
        client.close()


def test_openrlhf_lists_of_different_lengths_answer_each_query(http: httpx.Client) -> None:
    """The schema cannot say "as long as `query`": each sample says it, one number each."""
    response = http.post(
        "/openrlhf/reward",
        params={"deadline_s": 5},
        json={"query": ["a", "b"], "prompts": ["a"], "labels": None},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["rewards"] == [0.0, 0.0]
    assert all("as long as query" in d["error"] for d in body["proctor"]), body["proctor"]
