"""RQ job functions and everything they drive: sandbox, anti-cheat, evaluation."""
