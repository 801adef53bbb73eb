"""verl + Proctor: score code with Proctor from verl, calling it the ways verl does.

The config change, either of:

    # verl's own SandboxFusion reward, pointed at Proctor (nothing of Proctor imported):
    reward_model.sandbox_fusion.url=http://127.0.0.1:8000/run_code

    # Proctor's reward function (per-case results, verdicts, infra errors told apart):
    custom_reward_function.path=pkg://proctor.integrations.verl
    custom_reward_function.name=compute_score    # compute_score_float for reward_manager=prime,
                                                 # compute_score_batch for reward_manager=batch
    +custom_reward_function.reward_kwargs.proctor_url=http://127.0.0.1:8000

`ground_truth` in the parquet is what verl's code datasets already hold (`{"inputs",
"outputs", "fn_name"?}` or `{"assert_case": [...]}`), or a Proctor task. For multi-turn
agents, see verl_tool_config.yaml.

Run against a Proctor service (`make run`):  PROCTOR_URL=http://127.0.0.1:8000 python
examples/verl_reward.py — it calls the adapter as verl's reward managers would and prints
what verl would record. verl itself is not needed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from functools import partial

import httpx

from proctor.integrations import verl

URL = os.environ.get("PROCTOR_URL", "http://127.0.0.1:8000")
REWARD_KWARGS = {"proctor_url": URL}  # custom_reward_function.reward_kwargs

ADD = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
TWO_SUM = {"inputs": ["[2, 7, 11, 15]\n9"], "outputs": ["[0, 1]"], "fn_name": "twoSum"}
RIGHT = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"
SOLUTION = """```python
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, n in enumerate(nums):
            if target - n in seen:
                return [seen[target - n], i]
            seen[n] = i
```"""


def call_with_kwargs(raw_fn, extra_kwargs, *args, **kwargs):  # type: ignore[no-untyped-def]
    """How verl wraps a custom reward function (verl/trainer/ppo/reward.py)."""
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


def main() -> int:
    try:
        httpx.get(f"{URL}/healthz", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        print(f"no Proctor service at {URL} ({exc}); start one with `make run`", file=sys.stderr)
        return 1

    # reward_manager=naive (and the reward loop): keyword call, a dict back
    compute_score = partial(call_with_kwargs, verl.compute_score, REWARD_KWARGS)
    row = compute_score(data_source="codecontests", solution_str=RIGHT,
                        ground_truth=json.dumps(ADD), extra_info={"index": 0})
    print("naive   ", row)

    # reward_manager=prime: positional, in a process pool, a number back
    score = partial(call_with_kwargs, verl.compute_score_float, REWARD_KWARGS)
    print("prime   ", score("codecontests", WRONG, json.dumps(ADD), None))

    # reward_manager=batch: the whole batch in one call (one submission to Proctor)
    rows = verl.compute_score_batch(
        data_sources=["codecontests", "leetcode"], solution_strs=[RIGHT, SOLUTION],
        ground_truths=[json.dumps(ADD), json.dumps(TWO_SUM)], extra_infos=[{}, {}],
        **REWARD_KWARGS)
    summary = [(r["score"], r["verdict"], r["tests_passed"], r["tests_total"]) for r in rows]
    print("batch   ", summary)

    # the reward loop with an async function: awaited, no thread per sample
    row = asyncio.run(verl.compute_score_async(
        "leetcode", SOLUTION, json.dumps(TWO_SUM), {}, **REWARD_KWARGS))
    print("async   ", row["score"], row["verdict"])

    # reward_model.sandbox_fusion.url: verl's own client posts this to /run_code per case
    payload = {"compile_timeout": 10, "run_timeout": 10, "code": "print(input()[::-1])",
               "stdin": "abc", "memory_limit_MB": 1024, "language": "python", "files": {},
               "fetch_files": []}
    answer = httpx.post(f"{URL}/run_code", json=payload, timeout=30).json()
    print("run_code", answer["status"], answer["run_result"]["stdout"].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
