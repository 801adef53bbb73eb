"""The latency histograms' buckets: the name of a bucket's field in Redis, named once for the
script that counts an episode and for the readers (`/metrics`, the web page), and the
quantile read off the counts.

The finish script once built the field name itself (`'b=' .. le`): Lua writes the bound 1.0
as "1" where Python writes "1.0", so every episode in a bucket with an integer bound (1, 5,
10, 30, 60, 300 s) was written where no reader looked and counted only in `+Inf`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from core import defaults

BUCKETS = defaults.LATENCY_BUCKETS


def bucket_field(le: float) -> str:
    """The hash field counting the episodes of one bucket (each in its own, not cumulative)."""
    return f"b={le!r}"


def bucket_of(seconds: float | None) -> str:
    """The bound (`le`) of the one bucket a latency falls in, "+Inf" past the last; "" for none."""
    if seconds is None:
        return ""
    for le in BUCKETS:
        if seconds <= le:
            return repr(le)
    return "+Inf"


def counts(raw: Mapping[str, float]) -> list[tuple[float, int]]:
    """A histogram hash's episodes per bucket (not cumulative), `+Inf` last."""
    per_bucket = [(le, int(raw.get(bucket_field(le), 0))) for le in BUCKETS]
    finite = sum(n for _, n in per_bucket)
    return [*per_bucket, (math.inf, max(int(raw.get("count", 0)) - finite, 0))]


def quantile(buckets: list[tuple[float, int]], total: int, q: float) -> float | None:
    """The upper bound of the bucket holding quantile q (the last finite one past the end)."""
    if total <= 0:
        return None
    seen = 0
    for le, n in buckets:
        seen += n
        if seen >= q * total:
            return le if math.isfinite(le) else BUCKETS[-1]
    return BUCKETS[-1]
