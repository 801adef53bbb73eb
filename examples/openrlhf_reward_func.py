"""OpenRLHF + Proctor: the remote reward, as a file for `--remote_rm_url`.

The config change, either of:

    # the Proctor service answers OpenRLHF's remote reward protocol itself:
    --remote_rm_url http://127.0.0.1:8000/openrlhf/reward --label_key task

    # or this file, loaded by OpenRLHF in the rollout workers (it calls the same service):
    --remote_rm_url /path/to/examples/openrlhf_reward_func.py --label_key task

The `task` column holds each prompt's task: the JSON of a code ground truth (`{"inputs",
"outputs", "fn_name"?}`, `{"assert_case": [...]}`, …) or of a Proctor task, or a task id
defined in the JSON Lines file `PROCTOR_TASKS_FILE` (set it where the service runs when
OpenRLHF posts to the service; where OpenRLHF runs when it loads this file).

Run against a Proctor service (`make run`):  PROCTOR_URL=http://127.0.0.1:8000 python
examples/openrlhf_reward_func.py — it calls the reward both ways OpenRLHF does.
OpenRLHF itself is not needed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import httpx

from proctor.integrations.openrlhf import reward_func

__all__ = ["reward_func"]  # what OpenRLHF loads from this file

URL = os.environ.get("PROCTOR_URL", "http://127.0.0.1:8000")
PROMPT = ("<|im_start|>user\nRead two integers and print their sum.<|im_end|>\n"
          "<|im_start|>assistant\n")
TASK = json.dumps({"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]})
RIGHT = PROMPT + "```python\na, b = map(int, input().split())\nprint(a + b)\n```<|im_end|>"
WRONG = PROMPT + "```python\nprint(3)\n```<|im_end|>"


async def post_like_openrlhf(queries: list[str], prompts: list[str], labels: list[str]) -> dict:  # type: ignore[type-arg]
    """What SingleTurnAgentExecutor._fetch_rewards_via_http sends (one query per request)."""
    payload = {"query": queries, "prompts": prompts, "labels": labels}
    async with httpx.AsyncClient(timeout=180) as client:
        response = await client.post(f"{URL}/openrlhf/reward", json=payload)
        response.raise_for_status()
        return response.json()  # type: ignore[no-any-return]


def main() -> int:
    try:
        httpx.get(f"{URL}/healthz", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        print(f"no Proctor service at {URL} ({exc}); start one with `make run`", file=sys.stderr)
        return 1
    # --remote_rm_url file.py: OpenRLHF calls reward_func([query], [prompt], [label]) in a thread
    for query in (RIGHT, WRONG):
        body = reward_func([query], [PROMPT], [TASK], proctor_url=URL)
        print("reward_func", body["rewards"], body["extra_logs"])
    # --remote_rm_url http://.../openrlhf/reward: OpenRLHF posts the same three lists
    body = asyncio.run(post_like_openrlhf([RIGHT], [PROMPT], [TASK]))
    print("HTTP       ", body["rewards"], body["scores"], body["proctor"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
