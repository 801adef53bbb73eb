"""Episode records in Redis: the one source of truth for status and results.

API processes and workers share this package. Every state change goes through a Lua script,
so a terminal state is written exactly once — whoever gets there first (the worker with a
result, the janitor with an abandoned episode, the API with a cancel) wins, and the others
see `False` and discard their outcome. The same script counts verdicts and latencies, so
`/metrics` is the same on every API replica however many workers there are. The statuses
the scripts compare against come from `EpisodeStatus` (`scripts.LUA_STATUSES`), their keys from
core/keys.py; an episode's hash is read and written as typed records (`EpisodeRecord`,
`SandboxState`), never field by field outside this package.

Each concern is a module of its own, and `EpisodeStore` (the one handle a process holds)
is made of them:
    scripts.py          Lua scripts with named keys and arguments (`LuaScript`)
    records.py          the record's fields and its typed forms (`EpisodeRecord`, …)
    encoding.py         text that can be stored whatever a sandbox wrote
    admission.py        creating records: dedup and the queue bounds (`create`, `add`)
    lifecycle.py        advancing and finishing an episode (the finish script's jobs)
    pace.py             the drain rate the admission bounds read, the finish writes
    counters.py         verdicts, latency histograms, named counters (`stats`, `count`)
    catalog_index.py    what the catalog lists of an ended episode (`CatalogEntry`)
    steps.py            interactive steps, and replies to the API (`ReplyWaiter`)
    reads.py            records, statuses, the live sets, a wait's outcome
    worker_registry.py  heartbeats and problems of workers
    images.py           what each worker can run (`ImageReport`)
    shares.py           a host's capacity shares and the line for them (`Share`)
    episode_store.py    `EpisodeStore`

Keys (all under `proctor:`, each built by the function or constant of core/keys.py named
on the right; RQ's own keys, `rq:…`, are RQ's):
    episode:{id}          hash: the record (fields below)                     episode()
    steps:{id}            list: an interactive episode's steps, JSON, in order steps()
    active                zset: non-terminal episode ids by creation time     ACTIVE
    queued                zset: episode ids not started yet, by creation time: QUEUED
                          what the queue bound counts (written with the record)
    pace                  hash: gap (s, a moving average of the time between  PACE
                          two ends while episodes wait: the drain rate) and
                          gaps (how many it has counted, up to 20), busy
                          (s, of a worker's time on a one-shot episode), the
                          last end's time and whether episodes have waited
                          since (cleared when the queue runs dry): what the
                          wait bound estimates a newcomer's wait from
    dedup:{sha256}        string: the episode of an identical one-shot request dedup()
                          (expires after PROCTOR_DEDUP_TTL_S)
    events                pub/sub: an episode id when it ends, and when an     EVENTS
                          interactive one's sandbox is ready (what waits wait for)
    repo:{sha256}         hash: a sealed repository, archive (tar.gz), base,   repo()
                          branch (expires after PROCTOR_REPO_TTL_S, renewed
                          by each use; core/repos.py)
    repo-sealing:{sha256} string: held while a worker seals a repository     repo_sealing()
                          read out of an image; the others wait for repo:
    reply:{token}         list: a worker's answer to one request the API       reply()
                          blocks on, JSON {status, body, message}
    acting:{id}           string: held while an interactive action runs        acting()
    stats:verdict         hash: verdict → count                                VERDICTS
    stats:latency:{m}     hash: one bucket per episode (b=…), sum, count,      latency()
                          for m in total / queued / run / sandbox_start
    stats:counters        hash: JSON [name, [[label, value], …]] → count       COUNTERS
    workers               zset: worker name → last heartbeat (unix time)       WORKERS
    worker-hosts          hash: worker name → its host id                      WORKER_HOSTS
    worker-problems       hash: worker name → why it cannot run episodes       WORKER_PROBLEMS
    worker-images         hash: worker name → JSON {at, images: {name: null    WORKER_IMAGES
                          (runnable) or why not}}
    judge:{digest}        string: a cached judge verdict, JSON                 judge_cache()
    judge-calibration     string: what the judge's last calibration found,     JUDGE_CALIBRATION
                          JSON (`anticheat.judge.calibration`)
    judge-calibration-lock  string: held while one process calibrates        JUDGE_CALIBRATION_LOCK
    reservations:{host}   hash: episode id → JSON [worker, millicpus,         reservations()
                          memory MiB]: what the host's running episodes hold
                          of its budget (`reserve`, `release`)
    waiting:{host}        zset: episode id → when it first asked: the line     waiting()
                          of episodes waiting for a share (`reserve`)
    waiting-asked:{host}  hash: episode id → when it last asked (a silent      waiting_asked()
                          one leaves the line)
    images-used:{host}    zset: task image reference → when an episode of the  images_used()
                          host last used it (the pull cache's LRU order)
    image-pulls:{host}    hash: task image reference → pulls made on the host  image_pulls()
    image-pull:{h}        string: held by the one worker of a host pulling an  image_pull()
                          image (h: sha256 of host and reference; expires)
    image-missing:{h}     string: why the registry has no such image (h:      image_missing()
                          sha256 of the reference; PROCTOR's IMAGE_MISSING_TTL_S)
    prefetch:{id}         hash: a prefetch's images and hosts (JSON) and one   prefetch()
                          field per host|image: its state (service/prefetch.py)
    catalog:ended         zset: ended episode ids by end time                  CATALOG
    catalog:by:{term}     zset: the same, of one verdict, mode or metadata     catalog_term()
                          pair (`catalog_terms`)
    catalog:minute:{m}    hash: what ended in minute m (unix time // 60): n,   catalog_minute()
                          v:{verdict}, c:{category}, timed, sum (total s),
                          t:{le} (total s, one bucket each, not cumulative)
    catalog:scratch:{t}   zset: an intersection a count builds and deletes     catalog_scratch()
                          in the same MULTI (service/catalog.py)
    catalog:rules         hash: rule id → episodes it hit                      CATALOG_RULES
    catalog:categories    hash: cheat category → episodes it was seen in       CATALOG_CATEGORIES

The catalog (`catalog:*`, read by service/catalog.py) is written by the finish script with
the terminal result, so it lists exactly the episodes that ended (see catalog_index.py).

Fields of `episode:{id}` (`RecordField`), by who writes them:
    request, status, mode, created   the API, creating it (`create`, `add`)
    ahead, admitted                  `create`: the episodes queued ahead of it, and when (the
                                     pace `advance` measures as it leaves the queue)
    worker, host                     the worker that starts it (`advance`)
    container                        one-shot: its container's name (`advance`)
    container, container_name, container_ip, keep, restore, observation, sandbox_start_s,
    warm, last_action                interactive: the started sandbox (`start_sandbox`,
                                     `SandboxState`); last_action again at every action
    steps                            interactive: the steps so far (`add_step`)
    result, finished                 whoever ends it (`finish`); with a sink (core/sink.py),
                                     that process also appends the episode's row to disk
    summary                          the same, for the catalog: `CatalogEntry`, JSON
"""

from __future__ import annotations

from core.store.admission import Admission
from core.store.catalog_index import (
    CATALOG_METADATA_TERMS,
    CATALOG_TERM_VALUE_CHARS,
    CatalogEntry,
    catalog_terms,
    latency_bucket,
    metadata_term,
    mode_term,
    verdict_term,
)
from core.store.counters import LATENCY_BUCKETS, LATENCY_METRICS
from core.store.encoding import dump_json, storable
from core.store.episode_store import EpisodeStore
from core.store.images import ImageReport
from core.store.pace import GAP_WEIGHT, PACE_WEIGHT
from core.store.reads import read_outcome, read_outcomes
from core.store.records import (
    EpisodeRecord,
    EpisodeSummary,
    MissingSandbox,
    RecordField,
    SandboxState,
    new_episode_id,
)
from core.store.shares import Share
from core.store.steps import ReplyWaiter

__all__ = [
    "CATALOG_METADATA_TERMS",
    "CATALOG_TERM_VALUE_CHARS",
    "GAP_WEIGHT",
    "LATENCY_BUCKETS",
    "LATENCY_METRICS",
    "PACE_WEIGHT",
    "Admission",
    "CatalogEntry",
    "EpisodeRecord",
    "EpisodeStore",
    "EpisodeSummary",
    "ImageReport",
    "MissingSandbox",
    "RecordField",
    "ReplyWaiter",
    "SandboxState",
    "Share",
    "catalog_terms",
    "dump_json",
    "latency_bucket",
    "metadata_term",
    "mode_term",
    "new_episode_id",
    "read_outcome",
    "read_outcomes",
    "storable",
    "verdict_term",
]
