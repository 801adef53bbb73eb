"""OpenRLHF + Proctor: a multi-turn coding agent acting in a Proctor interactive episode.

The config change:

    --agent_func_path /path/to/examples/openrlhf_agent.py --label_key task

The `task` column holds each prompt's Proctor task (JSON). The model runs commands in
```bash blocks and ends with `<submit/>`; the hidden tests' reward is paid at that step.
Each `AgentInstance` (one per prompt) drives one episode through Proctor's interactive API
(`POST /v1/episodes` with mode=interactive, `/actions`, `/finish`).

Run against a Proctor service (`make run`):  PROCTOR_URL=http://127.0.0.1:8000 python
examples/openrlhf_agent.py — it plays a scripted model through the executor's
reset/step calls. OpenRLHF itself is not needed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from proctor.integrations.openrlhf import ProctorAgentSession

try:
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
except ImportError:  # OpenRLHF absent: the same contract, enough to run this file

    class AgentInstanceBase:  # type: ignore[no-redef]
        pass

    class MultiTurnAgentExecutor:  # type: ignore[no-redef]
        def __init__(self, agent_instance_cls: type) -> None:
            self.agent_instance_cls = agent_instance_cls


class AgentInstance(AgentInstanceBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.session = ProctorAgentSession(max_steps=16)

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return await self.session.reset(states)

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return await self.session.step(states)


class AgentExecutor(MultiTurnAgentExecutor):
    def __init__(self) -> None:
        super().__init__(AgentInstance)


TASK = {
    "statement": "Make add() in calc.py return the sum of its arguments.",
    "files": {"calc.py": "def add(a, b):\n    return 0\n"},
    "tests": {"files": {"test_calc.py": "from calc import add\n\n"
                                         "def test_add():\n    assert add(2, 3) == 5\n"}},
}
SCRIPT = [
    "Let me look.\n```bash\ncat calc.py\n```",
    "```bash\nprintf 'def add(a, b):\\n    return a + b\\n' > calc.py\n```",
    "Done. <submit/>",
]


async def demo() -> None:
    executor = AgentExecutor()
    agent = executor.agent_instance_cls()
    label = json.dumps(TASK)
    state = await agent.reset({"observation": TASK["statement"], "label": label})
    observation = state["observation"]
    for action in SCRIPT:  # what MultiTurnAgentExecutor.execute does around the model
        result = await agent.step({"observation_text": observation, "action_text": action,
                                   "label": label, "sampling_params": None})
        observation += action + result["environment_feedback"]
        print(f"reward={result['rewards'].item()} done={result['done']}")
        if result["done"]:
            break
    print(observation)


if __name__ == "__main__":
    os.environ.setdefault("PROCTOR_URL", "http://127.0.0.1:8000")
    sys.exit(asyncio.run(demo()))
