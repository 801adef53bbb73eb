"""TRL + Proctor: GRPO with Proctor as the reward function.

The config change:

    from proctor.integrations.trl import proctor_reward
    trainer = GRPOTrainer(model=..., reward_funcs=[proctor_reward], train_dataset=dataset, ...)

with a `task` column in the dataset (each row's code ground truth, or Proctor task, as
JSON) and `PROCTOR_URL` set. It is an async reward function: TRL awaits it once per batch
and it submits the whole batch to Proctor at once. An episode that failed in Proctor's
infrastructure scores None, which TRL leaves out instead of learning from it.
`make_reward_func(url, task_column=..., options=CodeTaskOptions(...))` sets it up otherwise.

Run against a Proctor service (`make run`):  PROCTOR_URL=http://127.0.0.1:8000 python
examples/trl_grpo.py — it calls the function as GRPOTrainer._calculate_rewards does.
TRL itself is not needed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx

from proctor.integrations.trl import proctor_reward

URL = os.environ.get("PROCTOR_URL", "http://127.0.0.1:8000")
TASK = json.dumps({"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]})
PROMPT = [{"role": "user", "content": "Read two integers and print their sum."}]


def completion(code: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"```python\n{code}\n```"}]


async def score_batch() -> list[float | None]:
    completions = [completion("a, b = map(int, input().split())\nprint(a + b)"),
                   completion("print(3)"),
                   completion("import sys\nprint(sum(map(int, sys.stdin.read().split())))")]
    metrics: dict[str, Any] = {}
    # GRPOTrainer._calculate_rewards: prompts, completions, completion_ids, every dataset
    # column but the prompt, trainer_state, log_extra, log_metric
    return await proctor_reward(
        prompts=[PROMPT] * 3, completions=completions, completion_ids=[[0]] * 3,
        task=[TASK] * 3, trainer_state=None,
        log_extra=lambda column, values: print(f"log_extra {column}: {values}"),
        log_metric=metrics.__setitem__,
    )


def main() -> int:
    os.environ.setdefault("PROCTOR_URL", URL)
    try:
        httpx.get(f"{URL}/healthz", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        print(f"no Proctor service at {URL} ({exc}); start one with `make run`", file=sys.stderr)
        return 1
    print("rewards", asyncio.run(score_batch()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
