"""The catalog index: what the finish script writes of an ended episode so that
service/catalog.py can list, filter and count ended episodes without reading records.

Per episode one ZADD (+ a trim and an EXPIRE) into `catalog:ended` and into each of its
terms' sets (its verdict, its mode, its short metadata pairs: at most
`CATALOG_METADATA_TERMS`), one `summary` field in its record (`CatalogEntry`), and ~5
HINCRBYs into its minute — all in the finish script's call (`CATALOG_LUA`), no extra round
trip. Sets are trimmed to the result TTL as they are written (and expire with it when
nothing is written), so they hold what the records still hold.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from core import latency
from proctor.models import EpisodeMode, EpisodeResult, EpisodeStatus, Verdict

# A metadata pair is a catalog term (filterable) when its value is at most this long, and
# an episode is listed under at most this many pairs (the model allows 64): the catalog's
# cost per episode stays small whatever a trainer puts there.
CATALOG_TERM_VALUE_CHARS = 128
CATALOG_METADATA_TERMS = 16
_SUMMARY_TEXT_CHARS = 200  # a summary's reason and metadata values are cut to this


def verdict_term(verdict: str) -> str:
    """The catalog term of a verdict ("none": an ended episode without one)."""
    return f"verdict={verdict}"


def mode_term(mode: str) -> str:
    return f"mode={mode}"


def metadata_term(key: str, value: str) -> str:
    """JSON, so that no key or value containing `=` can collide with another pair."""
    return "meta:" + json.dumps([key, value], separators=(",", ":"), ensure_ascii=False)


def catalog_terms(result: EpisodeResult) -> list[str]:
    """The terms an ended episode is listed under (each a `catalog:by:{term}` set)."""
    terms = [
        verdict_term(result.verdict.value if result.verdict else "none"),
        mode_term(result.mode.value),
    ]
    pairs = [
        (k, v) for k, v in sorted(result.metadata.items()) if len(v) <= CATALOG_TERM_VALUE_CHARS
    ]
    terms += [metadata_term(k, v) for k, v in pairs[:CATALOG_METADATA_TERMS]]
    return terms


def latency_bucket(total_s: float | None) -> str:
    """The one histogram bucket (`le`) a latency falls in, "+Inf" past the last; "" for none."""
    return latency.bucket_of(total_s)


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """What the catalog lists of an ended episode (its record's `summary`): small, so that
    a page of rows never parses whole results (which can be megabytes of output)."""

    id: str
    status: EpisodeStatus
    verdict: Verdict | None
    mode: EpisodeMode
    reward: float | None
    passed: bool | None
    duration_s: float | None
    image: str | None
    metadata: Mapping[str, str]
    created: float | None
    finished: float
    steps: int
    reason: str
    categories: tuple[str, ...]  # cheat categories seen (evidence, intercepted steps)
    rules: tuple[str, ...]  # the rules that hit

    @classmethod
    def of(cls, result: EpisodeResult, *, finished: float) -> CatalogEntry:
        categories = {e.category.value for e in result.cheat.evidence}
        categories |= {s.category.value for s in result.steps if s.category is not None}
        rules = {e.rule for e in result.cheat.evidence if e.rule}
        rules |= {s.rule for s in result.steps if s.rule}
        cut = _SUMMARY_TEXT_CHARS
        return cls(
            id=result.id,
            status=result.status,
            verdict=result.verdict,
            mode=result.mode,
            reward=result.reward,
            passed=result.passed,
            duration_s=result.timings.total_s,
            image=result.sandbox.image,
            metadata={k: v[:cut] for k, v in result.metadata.items()},
            created=result.created_at.timestamp() if result.created_at else None,
            finished=finished,
            steps=len(result.steps),
            reason=result.reason[:cut],
            categories=tuple(sorted(categories)),
            rules=tuple(sorted(rules)),
        )

    def encode(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "status": self.status.value,
                "verdict": self.verdict.value if self.verdict else None,
                "mode": self.mode.value,
                "reward": self.reward,
                "passed": self.passed,
                "duration_s": self.duration_s,
                "image": self.image,
                "metadata": dict(self.metadata),
                "created": self.created,
                "finished": self.finished,
                "steps": self.steps,
                "reason": self.reason,
                "categories": list(self.categories),
                "rules": list(self.rules),
            },
            ensure_ascii=False,
        )

    @classmethod
    def decode(cls, raw: str) -> CatalogEntry:
        d = json.loads(raw)
        return cls(
            id=d["id"],
            status=EpisodeStatus(d["status"]),
            verdict=Verdict(d["verdict"]) if d["verdict"] else None,
            mode=EpisodeMode(d["mode"]),
            reward=d["reward"],
            passed=d["passed"],
            duration_s=d["duration_s"],
            image=d["image"],
            metadata=d["metadata"],
            created=d["created"],
            finished=float(d["finished"]),
            steps=int(d["steps"]),
            reason=d["reason"],
            categories=tuple(d["categories"]),
            rules=tuple(d["rules"]),
        )


# The finish script's last job (core/store/lifecycle.py): list the ended episode.
# KEY.minute its minute's counts, KEY.rules rule hits, KEY.categories category counts,
# KEY.listed the sets it is listed in (`catalog:ended`, one per term).
# ARG.summary its `CatalogEntry`, ARG.trim the score below which a set's entries have
# expired, ARG.bucket its total latency's bucket, ARG.rules and ARG.categories (JSON lists).
CATALOG_LUA = """
local ttl = tonumber(ARG.ttl)
local minute = KEY.minute
redis.call('HINCRBY', minute, 'n', 1)
redis.call('HINCRBY', minute, 'v:' .. ARG.verdict, 1)
if ARG.bucket ~= '' then
  redis.call('HINCRBY', minute, 'timed', 1)
  redis.call('HINCRBYFLOAT', minute, 'sum', tonumber(ARG.total_s))
  redis.call('HINCRBY', minute, 't:' .. ARG.bucket, 1)
end
for _, c in ipairs(cjson.decode(ARG.categories)) do
  redis.call('HINCRBY', minute, 'c:' .. c, 1)
  redis.call('HINCRBY', KEY.categories, c, 1)
end
redis.call('EXPIRE', minute, ttl)
for _, r in ipairs(cjson.decode(ARG.rules)) do redis.call('HINCRBY', KEY.rules, r, 1) end
for _, set in ipairs(KEY.listed) do
  redis.call('ZADD', set, ARG.finished, ARG.id)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. ARG.trim)
  redis.call('EXPIRE', set, ttl)
end
"""
