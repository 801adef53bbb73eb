"""The worker entry point: `proctor worker` starts N worker processes on this host.

How many: `PROCTOR_WORKER_CONCURRENCY`, by default `auto` — as many as the host's CPU and
memory budget holds episodes of the default size (workers/capacity.py); every episode
reserves its own share of that budget before its sandbox starts, so a process that waits on
a looping or sleeping episode keeps no other from starting while the budget has room.
Each process is an RQ `SimpleWorker` (jobs run in the process, no fork per job) serving
this host's own queue first — interactive actions must reach the host that holds their
container — then the shared queue. Each has its own Redis client, Docker client, warm pool
and janitor thread. With more than one, a supervisor (workers/supervisor.py) keeps them
alive.

A worker rides out a Redis restart: its client retries every command with a backoff for
about a minute (`redis_client`), results wait for Redis however long it takes
(workers/jobs.py), and should RQ's loop still end on a Redis error — RQ 3 quits on any
error outside its dequeue — it is started again once Redis answers.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import multiprocessing
import signal
import sys
import time
from urllib.parse import urlsplit

import redis
from redis.backoff import EqualJitterBackoff
from redis.client import Pipeline
from redis.retry import Retry
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.utils import now
from rq.worker import WorkerStatus

from anticheat.judge.calibration import Calibrator
from anticheat.judge.client import Judge, JudgeSettings
from core.config import Settings
from core.defaults import (
    REDIS_HEALTH_CHECK_S,
    REDIS_RETRIES,
    REDIS_RETRY_WAIT_S,
    RQ_RESTART_PAUSE_S,
    RUN_CODE_MEMORY_MB,
    STARTUP_RETRY_S,
)
from core.languages import language
from core.queues import RUN_EPISODE, served_queues
from core.sink import EpisodeSink
from core.store import EpisodeStore
from proctor.models import Limits, TaskSpec, TestSpec
from workers import runtime
from workers.capacity import worker_count
from workers.guard import Guard
from workers.honeypot import Honeypot
from workers.janitor import Janitor, worker_name
from workers.sandbox.checks import pick_runtime, verify_protections
from workers.sandbox.demand import Budget, share
from workers.sandbox.engine import Engine, SandboxError
from workers.sandbox.server_sandboxes import RunnerPool
from workers.sandbox.warm_pool import WarmPool
from workers.teardown import honeypot_name, leave_engine

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
LOG_FORMAT = "%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s"


def _default_task() -> TaskSpec:
    return TaskSpec(tests=TestSpec(files={}), files={})


def _warm_tasks(settings: Settings) -> list[TaskSpec]:
    """The sandbox shapes a worker starts with warm: the default task's, and that of a
    SandboxFusion `/run_code` request naming no memory (verl's and others'), where the
    deployment has its image."""
    tasks = [_default_task()]
    image = language("python").image
    if image in settings.images:
        limits = Limits(memory_mb=RUN_CODE_MEMORY_MB)
        tasks.append(TaskSpec(image=image, tests=TestSpec(files={}), files={}, limits=limits))
    return tasks


def holder_image(settings: Settings) -> str | None:
    """The deployment's own image network holders are made from (never a task's)."""
    return settings.images.get("python") or next(iter(settings.images.values()), None)


def redis_client(url: str) -> redis.Redis:
    """A worker's one Redis client: it waits out a restart instead of failing the job.

    Every command is retried `REDIS_RETRIES` times, up to `REDIS_RETRY_WAIT_S` apart (half
    of it at least): a Redis restart of up to about a minute goes unnoticed.
    """
    retry = Retry(
        EqualJitterBackoff(cap=REDIS_RETRY_WAIT_S, base=REDIS_RETRY_WAIT_S / 4),
        retries=REDIS_RETRIES,
    )
    return redis.Redis.from_url(
        url,
        health_check_interval=REDIS_HEALTH_CHECK_S,
        retry=retry,
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


# RQ's heartbeats closer together than this are one (see EpisodeWorker)
HEARTBEAT_SKIP_S = 1.0
# how often the listener of RQ's control channel looks at its stop flag (RQ's own: 60 s)
LISTENER_POLL_S = 1.0


class EpisodeWorker(SimpleWorker):
    """RQ's in-process worker that tells a requested stop from a loop that died, and that
    leaves out the bookkeeping writes that would change nothing.

    Between two jobs RQ writes the worker's state `idle` twice and sends two heartbeats of
    three commands each, one round trip per command. A state that is already written, and a
    heartbeat within `HEARTBEAT_SKIP_S` of the last that would not push the worker key's
    expiry further out than that one did, are skipped: the second of each (the first
    heartbeat extends the key past the job's shorter one). The key expires at most
    `HEARTBEAT_SKIP_S` earlier than RQ asked, against a TTL of minutes. The rest go out
    together: a heartbeat's three commands are one round trip, and a job's end writes its
    `idle` state with that heartbeat. RQ also asks before every job whether workers are
    suspended (`rq suspend`): asked at most every `HEARTBEAT_SKIP_S` here, so a suspension
    takes hold within that. And a job's end no longer writes the job's heartbeat on its own
    just before the job is saved whole with it. 6 of the 19 round trips a job took become 1.
    Writes on a pipeline go through unchanged: they cost no round trip of their own.
    """

    stop_asked = False
    _state_written: str | None = None
    _beat_at = 0.0  # monotonic time of the last heartbeat sent
    _beat_until = 0.0  # the worker key's expiry it set, on the same clock
    _unsuspended_at = -HEARTBEAT_SKIP_S  # monotonic time workers were last seen not suspended

    def request_stop(self, signum: int, frame: object) -> None:
        self.stop_asked = True
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]

    def subscribe(self) -> None:
        """RQ's, with its control channel's listener looking at its stop flag every
        `LISTENER_POLL_S` instead of every 60 s. Stopping, RQ unsubscribes and then waits for
        that thread (redis-py 8 waits without a bound); a listener that had already read the
        unsubscription sat out the rest of its minute first, so a stopped worker outlived
        its stop by up to a minute and was killed with its sandboxes still up."""
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        # RQ declares the attribute as its initial None
        self.pubsub_thread = self.pubsub.run_in_thread(  # type: ignore[assignment]
            sleep_time=LISTENER_POLL_S,
            daemon=True,
            exception_handler=self._pubsub_exception_handler,
        )

    def set_state(self, state: str, pipeline: Pipeline | None = None) -> None:
        if pipeline is None and state == self._state_written:
            self._state = state
            return
        super().set_state(state, pipeline)
        self._state_written = state

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        ttl = timeout or self.worker_ttl + 60
        at = time.monotonic()
        recent = at - self._beat_at < HEARTBEAT_SKIP_S
        if pipeline is None and recent and self._beat_until >= at + ttl - HEARTBEAT_SKIP_S:
            return
        if pipeline is None:
            with self.connection.pipeline(transaction=False) as batch:
                super().heartbeat(ttl, batch)
                batch.execute()
        else:
            super().heartbeat(ttl, pipeline)
        self._beat_at, self._beat_until = at, at + ttl

    def check_for_suspension(self, burst: bool) -> None:
        if time.monotonic() - self._unsuspended_at < HEARTBEAT_SKIP_S:
            return
        super().check_for_suspension(burst)
        self._unsuspended_at = time.monotonic()

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        """RQ's without its write of the job's heartbeat: a job that returned is saved whole
        right after, heartbeat included (ours have no callbacks to keep alive meanwhile);
        one that raised keeps the heartbeat of its start beside its failure."""
        job.ended_at = job.last_heartbeat = now()

    def execute_job(self, job: Job, queue: Queue) -> None:
        """SimpleWorker's, its closing `idle` sent with the heartbeat RQ's loop sends next
        (which then finds nothing new to say)."""
        execution = self.prepare_execution(job)
        self.perform_job(job, queue, execution)
        with self.connection.pipeline(transaction=False) as batch:
            self.set_state(WorkerStatus.IDLE, batch)
            self.heartbeat(pipeline=batch)
            batch.execute()


def wait_for_redis(client: redis.Redis, url: str) -> None:
    """Redis may come up after us (compose, a restart): wait for it, one line a retry."""
    while True:
        try:
            client.ping()
            return
        except redis.RedisError as exc:
            log.error(
                "Redis at %s does not answer (%s); retrying in %.0fs",
                redact(url),
                exc,
                STARTUP_RETRY_S,
            )
            time.sleep(STARTUP_RETRY_S)


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url


def connect_engine(settings: Settings, store: EpisodeStore, worker: str) -> tuple[Engine, Settings]:
    """Wait until Docker answers, the images are there and the protections hold; the
    settings with the OCI runtime picked when they named none (`pick_runtime`).

    Meanwhile the worker heartbeats with its problem, so `/readyz` says what is wrong.
    """
    store.report_problem(worker, "starting: checking Docker, the images and the protections")
    janitor = Janitor(
        store,
        worker=worker,
        host=settings.host_id,
        heartbeat_s=settings.heartbeat_s,
        heartbeat_ttl_s=settings.heartbeat_ttl_s,
        sweep_s=settings.reaper_interval_s,
    )
    janitor.start()
    try:
        while True:
            try:
                engine = Engine(
                    worker=worker,
                    host=settings.host_id,
                    deployment=settings.deployment_id,
                    holder_image=holder_image(settings),
                )
                engine.ping()
                for image in settings.images.values():
                    engine.image_digest(image)
                probe_rt = runtime.Runtime(
                    settings,
                    store.redis,
                    store,
                    engine,
                    WarmPool(engine, size=0),
                    worker,
                    Guard(store),
                )
                spec = probe_rt.spec_for(_default_task())
                if settings.runtime is None:
                    settings = settings.model_copy(update={"runtime": pick_runtime(engine, spec)})
                else:
                    verify_protections(engine, spec)
                store.report_problem(worker, None)
                return engine, settings
            except SandboxError as exc:
                log.error(
                    "worker %s cannot run sandboxes: %s (retrying in %.0fs)",
                    worker,
                    exc,
                    STARTUP_RETRY_S,
                )
                store.report_problem(worker, str(exc))
                time.sleep(STARTUP_RETRY_S)
    finally:
        janitor.stop()


def die_with_parent() -> None:
    """Ask the kernel to SIGTERM us when our parent dies, so no worker outlives `run`."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        log.debug("prctl unavailable; workers may outlive their parent")


def make_judge(config: Settings, store: EpisodeStore, worker: str) -> Judge | None:
    """The judge, its verdicts used only once calibration has found them worth using (the
    probes run on a thread of their own, shared with the host's other workers via Redis)."""
    settings = JudgeSettings.from_settings(config)
    if not settings.enabled:
        log.info("no LLM judge configured (PROCTOR_JUDGE_URL): rule filter only")
        return None
    log.info("LLM judge at %s (model %s)", settings.url, settings.model or "server default")
    judge = Judge(settings, redis_client=store.redis, metrics=store)
    Calibrator(judge, store.redis, owner=worker).start()
    return judge


def start_honeypot(
    settings: Settings, engine: Engine, *, store: EpisodeStore | None = None, worker: str = ""
) -> Honeypot | None:
    """The honeypot, when the settings want one (None when they do not).

    Until it is up the worker takes no job: it heartbeats with the problem, so `/readyz`
    says what is wrong, and retries — serving sandboxes without the network the settings
    ask for would make this worker silently different from the others.
    """
    if settings.network == "none":
        return None
    honeypot = Honeypot(
        engine,
        network=settings.honeypot_network,
        image=settings.honeypot_image or settings.images["python"],
        name=honeypot_name(settings),
        subnets=settings.sandbox_subnets,
    )
    janitor = None
    try:
        while True:
            try:
                address = honeypot.ensure()
                break
            except SandboxError as exc:
                log.error(
                    "worker %s has no honeypot: %s (retrying in %.0fs)",
                    worker,
                    exc,
                    STARTUP_RETRY_S,
                )
                if store is not None:
                    store.report_problem(worker, f"the honeypot is not up: {exc}")
                    if janitor is None:
                        janitor = Janitor(
                            store,
                            worker=worker,
                            host=settings.host_id,
                            heartbeat_s=settings.heartbeat_s,
                            heartbeat_ttl_s=settings.heartbeat_ttl_s,
                            sweep_s=settings.reaper_interval_s,
                        )
                        janitor.start()
                time.sleep(STARTUP_RETRY_S)
    finally:
        if janitor is not None:
            janitor.stop()
    if store is not None and janitor is not None:
        store.report_problem(worker, None)
    log.info("honeypot %s at %s on network %s", honeypot.name, address, honeypot.network)
    return honeypot


def die_with_parent_if_spawned() -> None:
    if multiprocessing.parent_process() is not None:
        die_with_parent()


def serve(
    settings: Settings,
    *,
    burst: bool = False,
    child: bool = False,
    suffix: str | None = None,
    slot: tuple[int, int] = (0, 1),
) -> None:
    """One worker process: serve jobs until told to stop (`suffix`: see `worker_name`;
    `slot`: its index among the host's worker processes, and how many there are)."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    if child:
        die_with_parent()
    worker = worker_name(settings.host_id, suffix=suffix)
    client = redis_client(settings.redis_url)
    wait_for_redis(client, settings.redis_url)
    store = EpisodeStore(
        client, result_ttl_s=settings.result_ttl_s, sink=EpisodeSink.of(settings, worker)
    )
    engine, settings = connect_engine(settings, store, worker)
    # RQ imports the jobs at the first job; imported now, the grader's files they share are
    # registered before any pooled sandbox starts, which is then given them once instead of
    # in every request (`protocol.share`)
    importlib.import_module(RUN_EPISODE.rpartition(".")[0])
    # the host's floor and ceiling of idle sandboxes, shared out among its processes
    budget = Budget(share(settings.pool_host_max, slot[1], slot[0]))
    floor = min(share(settings.pool_host_min, slot[1], slot[0]), budget.ceiling)
    warm_pool = WarmPool(engine, size=settings.pool_size, budget=budget, floor=floor)
    pooled_sandboxes = (
        RunnerPool(engine, episodes=settings.pooled_episodes, budget=budget, floor=floor)
        if settings.isolation == "pooled"
        else None
    )
    # fresh containers, each with its server started, for one one-shot episode each
    one_shot_servers = RunnerPool(
        engine, episodes=1, size=settings.pool_size, budget=budget, floor=floor
    )
    honeypot = start_honeypot(settings, engine, store=store, worker=worker)
    guard = Guard(store, judge=make_judge(settings, store, worker), honeypot=honeypot)
    rt = runtime.Runtime(
        settings,
        client,
        store,
        engine,
        warm_pool,
        worker,
        guard,
        pooled_sandboxes=pooled_sandboxes,
        one_shot_servers=one_shot_servers,
    )
    runtime.install(rt)
    warm_pool.prewarm(rt.spec_for(_default_task()))
    for task in _warm_tasks(settings):
        if pooled_sandboxes is None:
            one_shot_servers.prewarm(rt.spec_for(task, server=True))
        else:
            pooled_sandboxes.prewarm(rt.spec_for(task, pooled=True))
    janitor = Janitor(
        store,
        worker=worker,
        host=settings.host_id,
        engine=engine,
        pools=[warm_pool, one_shot_servers]
        if pooled_sandboxes is None
        else [warm_pool, one_shot_servers, pooled_sandboxes],
        heartbeat_s=settings.heartbeat_s,
        heartbeat_ttl_s=settings.heartbeat_ttl_s,
        sweep_s=settings.reaper_interval_s,
        holding=rt.holding,
        busy=rt.busy,
        images=settings.images,
        idle_s=settings.interactive_idle_s,
        max_episode_s=settings.max_episode_s,
    )
    janitor.start()
    janitor.sweep()  # containers of workers that died before we started
    queues = [
        Queue(name, connection=client, serializer=JSONSerializer)
        for name in served_queues(settings.host_id)
    ]
    log.info("worker %s serving %s", worker, ", ".join(q.name for q in queues))
    try:
        work(client, settings.redis_url, queues, worker, burst=burst)
    finally:
        janitor.stop()
        # the containers of the interactive episodes this process serves: no other process
        # can serve their actions (the episodes end as lost: workers/janitor/episodes.py)
        for container_id in list(rt.holding.values()):
            engine.remove(container_id)
        warm_pool.close()
        one_shot_servers.close()
        if pooled_sandboxes is not None:
            pooled_sandboxes.close()
        engine.release_networks()
        try:
            store.forget_worker(worker)
            store.release_of(settings.host_id, worker)
        except redis.RedisError as exc:  # the others see it silent and judge it dead
            log.warning("worker %s: could not sign off: %s", worker, exc)
        log.info("worker %s stopped", worker)


def work(client: redis.Redis, url: str, queues: list[Queue], name: str, *, burst: bool) -> None:
    """RQ's loop, started again whenever it ends without being asked to (see the docstring)."""
    while True:
        rq_worker = EpisodeWorker(queues, connection=client, serializer=JSONSerializer, name=name)
        try:
            rq_worker.work(burst=burst, with_scheduler=False, logging_level="WARNING")
        except redis.RedisError as exc:
            log.error("worker %s: Redis failed under RQ's loop: %s", name, exc)
        if burst or rq_worker.stop_asked:
            return
        log.warning(
            "worker %s: RQ's loop ended unasked; starting it again once Redis answers", name
        )
        time.sleep(RQ_RESTART_PAUSE_S)  # an error that repeats at once must not spin
        wait_for_redis(client, url)
        try:
            rq_worker.register_death()  # type: ignore[no-untyped-call]  # else a 2nd birth fails
        except redis.RedisError as exc:
            log.warning("worker %s: RQ's registry: %s", name, exc)


def run(settings: Settings, *, concurrency: int | None = None, burst: bool = False) -> int:
    """Start `concurrency` worker processes (by default the setting, or as many as the
    host's budget holds: `worker_count`) and keep them running; forward stop signals."""
    count = concurrency or worker_count(settings)
    if count == 1:
        try:
            serve(settings, burst=burst, child=multiprocessing.parent_process() is not None)
        finally:
            leave_engine(settings)
        return 0
    from workers.supervisor import Supervisor

    supervisor = Supervisor(settings, count, burst=burst, target=serve)
    die_with_parent_if_spawned()
    try:
        return supervisor.run()
    finally:
        leave_engine(settings)


if __name__ == "__main__":
    sys.exit(run(Settings()))
