"""Counters every API replica reads alike: verdicts and latency histograms (written by the
finish script, `STATS_LUA`) and named counters any process adds to (`Counters.count`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import redis

from core import defaults, keys, latency
from core.store.encoding import as_text

LATENCY_BUCKETS = defaults.LATENCY_BUCKETS
LATENCY_METRICS = ("total", "queued", "run", "sandbox_start")
# what the finish script is given of the buckets (ARG.buckets): [bound, field] each, the field
# named here (`latency.bucket_field`) since Lua would print 1.0 as "1"
LATENCY_FIELDS = json.dumps([[le, latency.bucket_field(le)] for le in LATENCY_BUCKETS])

# The finish script's stats job (core/store/lifecycle.py): count the verdict, and add each
# latency it has (ARG.{metric}_s, '' when none) to its histogram (KEY.latency_{metric}).
STATS_LUA = (
    "redis.call('HINCRBY', KEY.verdicts, ARG.verdict, 1)\n"
    + "local latencies = {"
    + ", ".join(f"{{KEY.latency_{m}, ARG.{m}_s}}" for m in LATENCY_METRICS)
    + "}\n"
    + """local buckets = cjson.decode(ARG.buckets)
for _, latency in ipairs(latencies) do
  local key, v = latency[1], latency[2]
  if v ~= '' then
    local x = tonumber(v)
    redis.call('HINCRBYFLOAT', key, 'sum', x)
    redis.call('HINCRBY', key, 'count', 1)
    -- one bucket per episode (b=…, not cumulative): the reader sums them up
    for _, b in ipairs(buckets) do
      if x <= b[1] then redis.call('HINCRBY', key, b[2], 1) break end
    end
  end
end
"""
)


class Counters:
    """Verdict and latency stats, and named counters (`stats:*`)."""

    redis: redis.Redis

    def stats(self) -> tuple[dict[str, int], dict[str, dict[str, float]]]:
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(keys.VERDICTS)
        for metric in LATENCY_METRICS:
            pipe.hgetall(keys.latency(metric))
        verdicts, *latencies = pipe.execute()
        return (
            {as_text(k): int(v) for k, v in verdicts.items()},
            {
                m: {as_text(k): float(v) for k, v in raw.items()}
                for m, raw in zip(LATENCY_METRICS, latencies, strict=True)
            },
        )

    def count(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Count an event in Redis (e.g. judge calls by outcome), visible on every replica."""
        self.redis.hincrbyfloat(keys.COUNTERS, _counter_field(name, labels), amount)

    def extra_metrics(self) -> list[Any]:
        from prometheus_client.core import CounterMetricFamily

        families: dict[str, Any] = {}
        for field, value in self.redis.hgetall(keys.COUNTERS).items():
            name, labels = _counter_parts(as_text(field))
            family = families.get(name)
            if family is None:
                family = families[name] = CounterMetricFamily(
                    name, name, labels=[k for k, _ in labels]
                )
            family.add_metric([v for _, v in labels], float(value))
        return list(families.values())


def _counter_field(name: str, labels: Mapping[str, str]) -> str:
    return json.dumps([name, sorted(labels.items())])


def _counter_parts(field: str) -> tuple[str, list[tuple[str, str]]]:
    name, labels = json.loads(field)
    return name, [(k, v) for k, v in labels]
