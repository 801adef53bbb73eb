"""Every tunable default and timing constant of the server side, named once (as rq's
`defaults.py` does).

The `Settings` fields (core/config.py) take their defaults from the first part (a field
whose default is "unset" has none here), so docs/configuration.md and this file describe
the same deployment; the rest are the
heartbeats, TTLs, retries, margins and grace periods the modules use, which no variable
sets. Durations are in seconds (`_S`), sizes in bytes unless the name says otherwise.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

# ---------------------------------------------------------------- settings (PROCTOR_*)

# --- where things are
REDIS_URL: Final = "redis://127.0.0.1:6379/0"  # queues, episodes, heartbeats
HOST: Final = "127.0.0.1"  # the API's listening address
PORT: Final = 8000  # the API's port

# --- API
MAX_BODY_BYTES: Final = 32 * 1024 * 1024  # largest request body read
MAX_WAIT_S: Final = 300.0  # longest `?wait=` a request may block
MAX_QUEUE_DEPTH: Final = 10_000  # queued episodes beyond which submissions get 429
# a submission whose first episode would wait longer than this in the queue gets 429 (0:
# none). 1 s: `Retry-After` is whole seconds, and under 1 s a refused client cannot be told
# to come back before the queue runs dry (at 0.5 s a C=16 loop ran at 2/s); at 1 s, 2x the
# sustainable rate was served at 1.4x the C=16 p95 (docs/configuration.md, bench/overload.py)
MAX_QUEUE_WAIT_S: Final = 1.0
MAX_BATCH: Final = 1_000  # most episodes in one batch request
RESULT_TTL_S: Final = 24 * 3600  # finished episodes stay readable this long
REPO_TTL_S: Final = 24 * 3600  # a sealed repository outlives its last use by this
REPO_MAX_MB: Final = 256  # the largest repository upload, and sealed repository, kept
DEDUP_TTL_S: Final = 600  # identical one-shot requests within this window share an episode
SINK_MAX_BYTES: Final = 256 * 1024 * 1024  # a durable sink file rotates at this size (and daily)
EXPORT_PAGE: Final = 500  # episodes an export reads from Redis per pipelined round trip

# --- sandboxes
PYTHON_IMAGE: Final = "proctor/sandbox-python:latest"  # the `python` task image
# `python-sci`: the python image plus numpy, pandas, scipy ... (images/sandbox-python-sci)
PYTHON_SCI_IMAGE: Final = "proctor/sandbox-python-sci:latest"
# one image per language family (core/languages.py; images/sandbox-lang)
LANGUAGE_IMAGES: Final = MappingProxyType(
    {
        family: f"proctor/sandbox-{family}:latest"
        for family in (
            *("cpp", "java", "go", "node", "rust"),
            *("script", "mono", "jvm", "r", "racket", "d", "jest"),
        )
    }
)
IMAGES: Final = MappingProxyType(  # task image name → reference
    {"python": PYTHON_IMAGE, "python-sci": PYTHON_SCI_IMAGE, **LANGUAGE_IMAGES}
)
SANDBOX_USER: Final = "1000:1000"  # uid:gid the code under test runs as
POOL_SIZE: Final = 2  # at most this many idle started sandboxes per spec per worker process
POOL_HOST_MIN: Final = 1  # idle ones kept of each prewarmed spec per host, with no demand
POOL_HOST_MAX: Final = 16  # idle and starting ones per host, all specs and pools together
# a SandboxFusion `/run_code` request's memory when it names none (its pools are prewarmed too)
RUN_CODE_MEMORY_MB: Final = 1024
# `pooled` (sandboxes serving one episode after another, each a fresh uid, graded split:
# docs/isolation.md) holds the red team's attacks as a fresh container does, at ~10x its
# throughput; `container`: a fresh one per episode (a task may ask for it)
ISOLATION: Final = "pooled"
POOLED_EPISODES: Final = 200  # episodes one pooled sandbox serves before it is replaced
NETWORK: Final = "auto"  # `auto`: the honeypot network where a task allows; `none`: never
HONEYPOT_NETWORK: Final = "proctor-sandbox"  # the honeypot's own internal network
SANDBOX_SUBNETS: Final = "10.213.0.0/16"  # each sandbox's /29 network is carved from here
MAX_EPISODE_S: Final = 3600.0  # longest an episode (or a one-shot's timeouts together) may run
INTERACTIVE_IDLE_S: Final = 300.0  # an interactive episode idle this long ends as timeout
MAX_PIDS: Final = 1024  # largest `limits.pids`
# unset PROCTOR_MAX_MEMORY_MB / _DISK_MB, as shares of the host's memory: one sandbox's, and
# each of its three tmpfs mounts' (workspace, home, /tmp), whose pages count against it too
MEMORY_SHARE: Final = 0.5
DISK_SHARE: Final = 0.25
MAX_OUTPUT_BYTES: Final = 16 * 1024 * 1024  # largest `limits.output_bytes` (per stream)

# --- workers
# worker processes `proctor worker` starts on a host; `auto`: as many as the host's budget
# holds episodes of the default size (`Limits()`), see workers/capacity.py
WORKER_CONCURRENCY: Final = "auto"
# a host's budget for the sandboxes running at once: its CPUs times this (Docker's CPU quota
# is a ceiling, not a share: a sandbox waiting on I/O, sleeping or under its quota uses less)
CPU_OVERSUBSCRIBE: Final = 4.0
MEMORY_OVERSUBSCRIBE: Final = 1.0  # ... and its memory times this (a memory limit is a ceiling)
HEARTBEAT_S: Final = 2.0  # how often a worker process reports itself alive
HEARTBEAT_TTL_S: Final = 30.0  # a worker silent this long is dead
REAPER_INTERVAL_S: Final = 10.0  # how often a janitor sweeps

# --- the LLM judge (PROCTOR_JUDGE_*)
JUDGE_URL: Final = ""  # OpenAI-compatible base URL with its version; empty: no judge
JUDGE_MODEL: Final = ""  # empty: the first model the server lists
JUDGE_API_KEY: Final = ""  # bearer key for the judge server; empty: none
JUDGE_TIMEOUT_S: Final = 30.0  # a whole review of a trajectory, repair included
JUDGE_MAX_CONCURRENCY: Final = 4  # judge requests in flight per worker process
JUDGE_THRESHOLD: Final = 0.7  # a cheat verdict at or above this confidence intercepts
JUDGE_FAILURE_POLICY: Final = "fail_open"  # with no verdict: allow (and say so)
JUDGE_ACTION_BUDGET_S: Final = 5.0  # a whole review of one action, repair included
JUDGE_RESPONSE_FORMAT: Final = "auto"  # how structured output is asked for
JUDGE_CACHE_TTL_S: Final = 7 * 24 * 3600  # verdicts stay cached in Redis this long
JUDGE_CALIBRATION_INTERVAL_S: Final = 600.0  # the probes are put to the judge again this often
# bound on the whole prompt, in characters: 7000 leave room for the answer in a 4k-token
# context even for code at 2 characters a token; raise it for a judge with a long context
JUDGE_MAX_PROMPT_CHARS: Final = 7_000

# ---------------------------------------------------------------- Redis

REDIS_HEALTH_CHECK_S: Final = 30  # an idle connection is pinged before use after this long
REDIS_READ_RETRIES: Final = 3  # the API's async (read-only) client retries a broken connection
REDIS_RETRIES: Final = 60  # a worker retries each Redis command this often (~a minute) ...
REDIS_RETRY_WAIT_S: Final = 2.0  # ... waiting up to this long (half of it at least) between
RESULT_RETRY_BACKOFF_S: Final = (0.5, 10.0)  # a result waits for Redis: first, longest wait
BLOCKING_SOCKET_MARGIN_S: Final = 15.0  # a blocking read's socket outlives its wait by this
# an API process's async Redis connections in use at once, per client: each wait for a
# worker's reply holds one throughout (redis-py's pool holds 100 by default: the 101st was a 503)
API_REDIS_CONNECTIONS: Final = 4096
SUPERVISOR_REDIS_TIMEOUT_S: Final = 5.0  # the supervisor's one call (forget a dead child)

# ---------------------------------------------------------------- records and keys

# a live record outlives its longest run by this beyond the result TTL (`finish` shortens it)
LIVE_RECORD_MARGIN_S: Final = 2 * 3600
STEPS_TTL_MARGIN_S: Final = 24 * 3600  # an episode's steps outlive the result TTL by this
REPLY_TTL_S: Final = 300  # an answer nobody popped (the API gave up) expires
# request latencies, histogram bucket bounds
LATENCY_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# ---------------------------------------------------------------- queueing (API side)

# A job that succeeded is RQ's for a second more: our record carries the result, and nothing
# reads RQ's copy (the janitor reads only the jobs of episodes still queued). Not deleted at
# once (`result_ttl=0`): RQ then reads the job's status and its executions back before it
# deletes them, 7 round trips more per episode than letting its keys expire; its id stays in
# RQ's finished registry until a worker's maintenance trims it (every 10 minutes).
SUCCEEDED_JOB_TTL_S: Final = 1
FAILED_JOB_TTL_S: Final = 3600  # a failed job stays a while, for whoever looks into it
# The door stays shut at most this long after a refusal, whatever the drain estimate says
# (a worker host that joins drains faster than the estimate knows); and a request let
# through to find out whether one more episode passes holds it at most this long
MAX_SHUT_S: Final = 1.0

JOB_OVERHEAD_S: Final = 120  # beyond its timeouts a job needs this to start, write, clean up
QUEUE_FULL_RETRY_AFTER_S: Final = 5  # `Retry-After` of a 429 (the queue bound)
NO_REPLY_RETRY_AFTER_S: Final = 5  # `Retry-After` when no worker answered an action in time
PULL_TIMEOUT_S: Final = 600.0  # the longest a worker waits for a task image's pull
IMAGE_CACHE_GB: Final = 50.0  # disk pulled task images may take per host (LRU beyond it)
IMAGE_MISSING_TTL_S: Final = 300  # a reference its registry said does not exist is refused
PREFETCH_TTL_S: Final = 86_400  # a prefetch's progress is kept a day
IMAGE_RETRY_AFTER_S: Final = 10  # `Retry-After` when no live worker can run an image
REDIS_DOWN_RETRY_AFTER_S: Final = 5  # `Retry-After` of a 503 for Redis not answering
EVENTS_RECONNECT_S: Final = 0.5  # the API's event listener re-subscribes after this
STATUS_READS_IN_FLIGHT: Final = 32  # an API process's waits read statuses this many at once
# an API process's requests to queue episodes between its door and Redis's answer at once
# (`EpisodeQueue.enter`)
INTAKE_LANES: Final = 4
INLINE_DECODE_BYTES: Final = 64 * 1024  # a result up to this is decoded on the event loop

# ---------------------------------------------------------------- interactive episodes (API)

INTERACTIVE_START_S: Final = 180.0  # longest a create waits for the sandbox to be ready
REPLY_MARGIN_S: Final = 60.0  # an action's reply is awaited this long beyond its timeout
FINISH_MARGIN_S: Final = 120.0  # a finish's reply is awaited this long beyond the tests' timeout
FILE_ACTION_S: Final = 30.0  # time limit of a file read or write action

# ---------------------------------------------------------------- uploaded archives (API)

# checked while the archive streams through its decompressor (core/archive.py)
ARCHIVE_MAX_BYTES: Final = 2 << 30  # an upload that unpacks past this is refused
ARCHIVE_MAX_RATIO: Final = 100  # ... or past this many times its compressed size
ARCHIVE_RATIO_ALLOWANCE_BYTES: Final = 1 << 20  # beyond this much (tar headers pad with zeros)
ARCHIVE_MAX_MEMBERS: Final = 500_000

# ---------------------------------------------------------------- the judge (workers)

JUDGE_MAX_TOKENS: Final = 256  # the verdict's answer: a small JSON object

# ---------------------------------------------------------------- adapters (API)

# verl's SandboxFusion client waits compile_timeout + run_timeout + this ...
SANDBOXFUSION_CLIENT_SLACK_S: Final = 10.0
SANDBOXFUSION_ANSWER_MARGIN_S: Final = 2.0  # ... and is answered with this much to spare
ADAPTER_START_MARGIN_S: Final = 10.0  # an episode's start-up and finish, beyond its limit

# ---------------------------------------------------------------- worker processes

STARTUP_RETRY_S: Final = 5.0  # a worker waiting for Redis, Docker or the honeypot retries
RQ_RESTART_PAUSE_S: Final = 1.0  # before RQ's loop is started again (must not spin)
JANITOR_STOP_S: Final = 10.0  # a stopping janitor waits this long for its threads
IMAGE_CHECK_SWEEPS: Final = 6  # a janitor asks the engine about its images every 6th sweep
FORGET_WORKER_AFTER_S: Final = 24 * 3600  # a worker silent this long leaves the registry
OUTAGE_BEATS: Final = 3  # heartbeats further apart than this many intervals: Redis was away
SETTLED_S: Final = 60.0  # a child that ran this long died of something else than starting
RESPAWN_FIRST_S: Final = 1.0  # a child dying as it starts is replaced after this, doubling ...
RESPAWN_LONGEST_S: Final = 60.0  # ... up to this
POOL_IDLE_DRAIN_S: Final = 600.0  # warm containers unused this long are removed
POOL_DEMAND_WINDOW_S: Final = 60.0  # a pool sizes a spec by its takes in this window
# a spec's idle surplus is trimmed only once it was not taken for this long: under load its
# pooled sandboxes are idle for a moment between episodes, and trimmed then they were
# replaced by fresh starts (~9 starts a round of 128 /run_code programs at C=16)
POOL_TRIM_QUIET_S: Final = 10.0
POOL_START_GUESS_S: Final = 1.0  # a sandbox's start time until one is measured

# ---------------------------------------------------------------- a host's capacity

AUTO_WORKERS_MAX: Final = 64  # the most worker processes `auto` starts on one host
# what one worker process costs besides its sandboxes' budget, in MiB: 65 resident measured
# idle (2 cores, Python 3.12), more after episodes, and its warm containers' shims
WORKER_PROCESS_MB: Final = 128
# a one-shot episode waits this long at most for its cpus/memory_mb to fit its host's budget
# (then it ends as infra_error, reward null); well within a job's JOB_OVERHEAD_S
RESERVE_WAIT_S: Final = 60.0
# ... asking again after the first times (its place in line + 1), up to the second
RESERVE_POLL_S: Final = (0.02, 0.25)
# a waiter silent this long has left the line
RESERVE_LEFT_S: Final = 5.0
RESERVE_STATUS_S: Final = 1.0  # ... and looking this often whether it ended meanwhile
RESERVATIONS_TTL_S: Final = 24 * 3600  # a host's reservations outlast its last sweep this long

# ---------------------------------------------------------------- compiling

# a compile is stopped once it has both run and spent CPU for its compile_timeout; a compile
# that waits on nothing is stopped at this many times it, plus the slack, of wall clock
COMPILE_WALL_FACTOR: Final = 4.0
COMPILE_WALL_SLACK_S: Final = 5.0
COMPILE_CACHE_MB: Final = 1024  # a host's compiled programs, least recently used evicted
