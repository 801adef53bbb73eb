"""Stage 3: the observation an intercepted action gets instead of running.
Entry point: `anticheat.response.replay.respond`."""
