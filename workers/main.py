"""The worker entry point: `proctor worker` starts N worker processes on this host.

Each process is an RQ `SimpleWorker` (jobs run in the process, no fork per job) serving
this host's own queue first — interactive actions must reach the host that holds their
container — then the shared queue. Each has its own Redis client, Docker client, warm pool
and janitor thread.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import time
from urllib.parse import urlsplit

import redis
from rq import Queue, SimpleWorker
from rq.serializers import JSONSerializer

from proctor.models import TaskSpec, TestSpec
from service.config import Settings
from service.queueing import QUEUE_NAME, host_queue_name
from service.store import EpisodeStore
from workers import runtime
from workers.anticheat.guard import Guard
from workers.anticheat.honeypot import Honeypot
from workers.anticheat.judge import Judge, JudgeSettings
from workers.janitor import Janitor, worker_name
from workers.sandbox.checks import verify_protections
from workers.sandbox.docker import Engine, SandboxError
from workers.sandbox.pool import WarmPool

log = logging.getLogger(__name__)

RETRY_S = 5.0
PR_SET_PDEATHSIG = 1
LOG_FORMAT = "%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s"


def _default_task() -> TaskSpec:
    return TaskSpec(tests=TestSpec(files={}), files={})


def wait_for_redis(client: redis.Redis, url: str) -> None:
    """Redis may come up after us (compose, a restart): wait for it, one line a retry."""
    while True:
        try:
            client.ping()
            return
        except redis.RedisError as exc:
            log.error("Redis at %s does not answer (%s); retrying in %.0fs",
                      redact(url), exc, RETRY_S)
            time.sleep(RETRY_S)


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url


def connect_engine(settings: Settings, store: EpisodeStore, worker: str) -> Engine:
    """Wait until Docker answers, the images are there and the protections hold.

    Meanwhile the worker heartbeats with its problem, so `/readyz` says what is wrong.
    """
    store.report_problem(worker, "starting: checking Docker, the images and the protections")
    janitor = Janitor(store, worker=worker, host=settings.host_id,
                      heartbeat_s=settings.heartbeat_s, heartbeat_ttl_s=settings.heartbeat_ttl_s,
                      sweep_s=settings.reaper_interval_s)
    janitor.start()
    try:
        while True:
            try:
                engine = Engine(worker=worker, host=settings.host_id,
                                deployment=settings.deployment_id)
                engine.ping()
                for image in settings.images.values():
                    engine.image_digest(image)
                probe_rt = runtime.Runtime(settings, store.redis, store, engine,
                                           WarmPool(engine, size=0), worker, Guard(store))
                verify_protections(engine, probe_rt.spec_for(_default_task()))
                store.report_problem(worker, None)
                return engine
            except SandboxError as exc:
                log.error("worker %s cannot run sandboxes: %s (retrying in %.0fs)",
                          worker, exc, RETRY_S)
                store.report_problem(worker, str(exc))
                time.sleep(RETRY_S)
    finally:
        janitor.stop()


def die_with_parent() -> None:
    """Ask the kernel to SIGTERM us when our parent dies, so no worker outlives `run`."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        log.debug("prctl unavailable; workers may outlive their parent")


def make_judge(client: redis.Redis) -> Judge | None:
    settings = JudgeSettings.from_env()
    if not settings.enabled:
        log.info("no LLM judge configured (PROCTOR_JUDGE_URL): rule filter only")
        return None
    log.info("LLM judge at %s (model %s)", settings.url, settings.model or "server default")
    return Judge(settings, redis_client=client)


def start_honeypot(settings: Settings, engine: Engine) -> Honeypot | None:
    """The honeypot network, when the settings want it; sandboxes fall back to none."""
    if settings.network == "none":
        return None
    honeypot = Honeypot(engine, network=settings.honeypot_network,
                        image=settings.honeypot_image or settings.images["python"],
                        name=f"proctor-honeypot-{settings.deployment_id}")
    try:
        address = honeypot.ensure()
    except SandboxError as exc:
        log.warning("honeypot unavailable, sandboxes get no network at all: %s", exc)
        return None
    log.info("honeypot %s at %s on network %s", honeypot.name, address, honeypot.network)
    return honeypot


def die_with_parent_if_spawned() -> None:
    if multiprocessing.parent_process() is not None:
        die_with_parent()


def serve(settings: Settings, *, burst: bool = False, child: bool = False) -> None:
    """One worker process: serve jobs until told to stop."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    if child:
        die_with_parent()
    worker = worker_name(settings.host_id)
    client = redis.Redis.from_url(settings.redis_url, health_check_interval=30)
    wait_for_redis(client, settings.redis_url)
    store = EpisodeStore(client, result_ttl_s=settings.result_ttl_s)
    engine = connect_engine(settings, store, worker)
    pool = WarmPool(engine, size=settings.pool_size)
    guard = Guard(store, judge=make_judge(client), honeypot=start_honeypot(settings, engine))
    rt = runtime.Runtime(settings, client, store, engine, pool, worker, guard)
    runtime.install(rt)
    pool.prewarm(rt.spec_for(_default_task()))
    janitor = Janitor(store, worker=worker, host=settings.host_id, engine=engine, pool=pool,
                      heartbeat_s=settings.heartbeat_s, heartbeat_ttl_s=settings.heartbeat_ttl_s,
                      sweep_s=settings.reaper_interval_s, holding=rt.holding,
                      idle_s=settings.interactive_idle_s, max_episode_s=settings.max_episode_s)
    janitor.start()
    janitor.sweep()  # containers of workers that died before we started
    queues = [
        Queue(name, connection=client, serializer=JSONSerializer)
        for name in (host_queue_name(settings.host_id), QUEUE_NAME)
    ]
    rq_worker = SimpleWorker(queues, connection=client, serializer=JSONSerializer, name=worker)
    log.info("worker %s serving %s", worker, ", ".join(q.name for q in queues))
    try:
        rq_worker.work(burst=burst, with_scheduler=False, logging_level="WARNING")
    finally:
        janitor.stop()
        pool.close()
        store.forget_worker(worker)
        log.info("worker %s stopped", worker)


def run(settings: Settings, *, concurrency: int | None = None, burst: bool = False) -> int:
    """Start `concurrency` worker processes and wait for them; forward stop signals."""
    count = concurrency or settings.worker_concurrency
    if count == 1:
        serve(settings, burst=burst, child=multiprocessing.parent_process() is not None)
        return 0
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=serve, args=(settings,), kwargs={"burst": burst, "child": True},
                        name=f"worker-{i}")
        for i in range(count)
    ]
    for process in processes:
        process.start()

    die_with_parent_if_spawned()

    def forward(signum: int, _frame: object) -> None:
        for process in processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for process in processes:
        process.join()
    return max((p.exitcode or 0) for p in processes)


if __name__ == "__main__":
    sys.exit(run(Settings()))
