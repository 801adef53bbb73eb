"""What a submission past the queue's wait bound is told, and how long an adapter's request
may let its episode wait: the arithmetic of backpressure, apart from Redis and HTTP.

The bound judges a submission by its first episode's estimated wait, when it would start
(`core.store.admission.CREATE`). Refused, a client of the core API gets 429 with
`Retry-After` the seconds until the queue has drained to the bound (`retry_after`). A
SandboxFusion or OpenRLHF client is synchronous and never sends a 429 again (verl's retries
only 504), so its request is held instead: admitted whenever its episode would start in
time to end within what its client still waits (`patience_s`), whatever the deployment's
bound; its client's concurrency is what bounds those.
"""

from __future__ import annotations

import math

# a patience this short admits an episode only into an empty queue (0 would turn the bound off)
LEAST_PATIENCE_S = 0.001


def retry_after(seconds: float) -> str:
    """`Retry-After` for a refusal the queue's drain ends in `seconds`: whole seconds (RFC
    9110's delta-seconds), rounded up so a client that honours it finds room, at least 1."""
    return str(max(1, math.ceil(seconds)))


def patience_s(deadline_s: float, timeout_s: float, margin_s: float) -> float:
    """How long an adapter's episode may wait in the queue: what its client still waits
    (`deadline_s`), less its own time limit and its start-up and finish (`margin_s`)."""
    return max(deadline_s - timeout_s - margin_s, LEAST_PATIENCE_S)
