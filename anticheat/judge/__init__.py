"""Stage 2: the LLM judge for what the rules send to review, and for whole trajectories.
Entry point: `anticheat.judge.client.Judge`."""
