"""Prometheus metrics, read from the counters the store keeps in Redis.

Workers are separate processes (often on other hosts), so their counts cannot live in this
process's memory: the finish script counts verdicts and latencies in Redis, and this
collector renders them, identically on every API replica.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import accumulate

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from core import latency
from core.store import LATENCY_METRICS
from service.deps import Resources


class RedisCollector(Collector):
    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def collect(self) -> Iterator[Metric]:
        store = self.resources.store
        verdicts, latencies = store.stats()
        episodes = CounterMetricFamily(
            "proctor_episodes", "Episodes ended, by verdict", labels=["verdict"]
        )
        for verdict, count in sorted(verdicts.items()):
            episodes.add_metric([verdict], count)
        yield episodes

        depth = GaugeMetricFamily("proctor_queue_depth", "Episodes waiting for a worker")
        depth.add_metric([], self.resources.queue.depth())
        yield depth

        active = GaugeMetricFamily("proctor_episodes_active", "Episodes not yet ended")
        active.add_metric([], store.active_count())
        yield active

        workers = GaugeMetricFamily("proctor_workers_live", "Workers with a recent heartbeat")
        workers.add_metric([], len(store.live_workers(self.resources.settings.heartbeat_ttl_s)))
        yield workers

        for metric in LATENCY_METRICS:
            raw = latencies.get(metric, {})
            family = HistogramMetricFamily(
                f"proctor_episode_{metric}_seconds", f"Episode {metric} time in seconds"
            )
            # each episode is counted in its own bucket only: Prometheus's are cumulative
            per_bucket = latency.counts(raw)
            cumulative = accumulate(n for _, n in per_bucket)
            buckets = [
                ("+Inf" if math.isinf(le) else str(le), float(n))
                for (le, _), n in zip(per_bucket, cumulative, strict=True)
            ]
            family.add_metric([], buckets, sum_value=raw.get("sum", 0.0))
            yield family

        yield from store.extra_metrics()


def exposition(resources: Resources) -> bytes:
    """The metrics in Prometheus' text format, read from Redis now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RedisCollector(resources))
    return generate_latest(registry)
