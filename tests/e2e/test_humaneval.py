"""All 164 HumanEval canonical solutions earn 1; with the body replaced by `return None`, 0."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests import humaneval

# on the test, not the module: test_container_mode.py imports it
needs_data = pytest.mark.skipif(
    not humaneval.DATA.exists(), reason=f"HumanEval data not found at {humaneval.DATA}"
)


def run_batch(http: httpx.Client, episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = http.post("/v1/episodes/batch", json={"episodes": episodes})
    assert response.status_code == 202, response.text
    ids = response.json()["ids"]
    assert len(ids) == len(episodes)
    results = []
    for episode_id in ids:
        result = http.get(f"/v1/episodes/{episode_id}", params={"wait": 300}).json()
        assert result["status"] == "completed", (result.get("error"), result)
        results.append(result)
    return results


@needs_data
def test_canonical_solutions_pass_and_broken_ones_fail(http: httpx.Client) -> None:
    problems = humaneval.load()
    assert len(problems) == 164
    episodes = [humaneval.episode(p) for p in problems]
    episodes += [humaneval.episode(p, broken=True) for p in problems]
    results = run_batch(http, episodes)
    wrong = [
        (r["metadata"]["task_id"], r["metadata"]["broken"], r["verdict"], r["reason"])
        for r in results
        if r["reward"] != (0.0 if r["metadata"]["broken"] == "true" else 1.0)
    ]
    assert not wrong, wrong
