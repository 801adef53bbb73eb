"""The API restarted while clients hold requests open for results: clients retry as
trainers do (the same request again, with the same idempotency key: one episode), and every
one of them gets its result — the episodes never depended on the API process."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import wait_until
from tests.faults.ledger import TERMINAL, Ledger, Row
from tests.faults.stack import Stack, add_episode

pytestmark = [pytest.mark.faults, pytest.mark.docker]

CLIENTS = 10
CLIENT_DEADLINE_S = 75
GRACE_S = 5.0


def trainer(url: str, body: dict[str, Any], deadline: float, out: dict[str, Any]) -> None:
    """POST and wait; on a dropped connection or a 5xx, back off and POST the same again
    (the same key: a retry of this call, not another sample)."""
    attempts = 0
    key = {"Idempotency-Key": uuid.uuid4().hex}
    with httpx.Client(base_url=url, timeout=60, headers=key) as http:
        while time.monotonic() < deadline:
            attempts += 1
            try:
                response = http.post("/v1/episodes", params={"wait": 30}, json=body)
            except httpx.TransportError:
                time.sleep(0.5)
                continue
            if response.status_code == 200 and response.json()["status"] in TERMINAL:
                out.update(response.json())
                break
            if response.status_code in (200, 202) or response.status_code >= 500:
                time.sleep(0.5)
                continue
            out.update({"status": f"refused {response.status_code}", "error": response.text})
            break
    out["attempts"] = attempts


def test_api_restarted_while_clients_wait(
    make_stack: Callable[..., Stack], report: Callable[[Row], None]
) -> None:
    stack = make_stack()
    row = Row("d. API restarted, clients waiting")
    started = time.monotonic()
    deadline = started + CLIENT_DEADLINE_S
    bodies = [add_episode(n, sleep_s=4 if n < 2 else 0) for n in range(CLIENTS)]
    outcomes: list[dict[str, Any]] = [{} for _ in bodies]
    threads = [
        threading.Thread(target=trainer, args=(stack.url, b, deadline, o), daemon=True)
        for b, o in zip(bodies, outcomes, strict=True)
    ]
    for thread in threads:
        thread.start()

    def episodes() -> list[str]:
        with stack.client() as client:
            return [k.rsplit(":", 1)[1] for k in client.scan_iter("proctor:episode:*")]

    assert wait_until(
        lambda: any(stack.episode_fields(i, "status")[0] == "running" for i in episodes()), 45
    ), "no episode started running"
    waiting = sum(1 for o in outcomes if not o)
    assert waiting > 0, "every client had its result before the restart: nothing was tested"
    row.extra["waiting_at_restart"] = waiting
    graceful = stack.restart_api(grace_s=GRACE_S)
    row.extra["api_stopped_gracefully_within_s"] = GRACE_S if graceful else None
    if not graceful:
        row.notes.append(
            f"the API did not stop within {GRACE_S}s of SIGTERM (held open waits); it was SIGKILLed"
        )
    for thread in threads:
        thread.join(timeout=max(deadline - time.monotonic(), 0) + 5)

    ledger = Ledger()
    for n, outcome in enumerate(outcomes):
        key = outcome.get("id") or f"client-{n}"
        ledger.accept(key)
        ledger.record(key, {"status": "no result", "reward": None, **outcome})
    ledger.fill(row)
    created = episodes()
    row.extra["episodes_created"] = len(created)
    row.extra["attempts"] = sum(o.get("attempts", 0) for o in outcomes)
    if len(created) > CLIENTS:
        row.notes.append(
            f"{len(created)} episodes for {CLIENTS} distinct requests "
            "(a retry ran its episode twice)"
        )
    row.recovered = (
        stack.api is not None and stack.api.poll() is None and stack.workers_gone() is None
    )
    row.seconds = round(time.monotonic() - started, 1)
    row.extra["logs"] = stack.logs()
    report(row)
    assert row.ok, row.summary()
