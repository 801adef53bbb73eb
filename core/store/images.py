"""Image reports: what each worker says it can run now (`worker-images`), and which images
no live worker can run (what the API refuses an episode for)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core import keys
from core.store.encoding import as_text
from core.store.worker_registry import WorkerRegistry


@dataclass(frozen=True, slots=True)
class ImageReport:
    """What one worker said it can run (`worker-images`): image name → None or why not."""

    at: float
    images: Mapping[str, str | None]

    def encode(self) -> str:
        return json.dumps({"at": self.at, "images": dict(self.images)})

    @classmethod
    def decode(cls, raw: str) -> ImageReport:
        report = json.loads(raw)
        return cls(at=float(report["at"]), images=report["images"])


class ImageReports(WorkerRegistry):
    """Publishing and reading image reports (`EpisodeStore.publish_images`, …)."""

    def publish_images(self, worker: str, images: Mapping[str, str | None]) -> None:
        """What a worker can run now: image name → None when it can, else why not.

        Workers call this as they re-check their images (an image can vanish after start).
        A claim counts only while its worker's heartbeat is fresh, so it dies with it.
        """
        report = ImageReport(at=time.time(), images=dict(images))
        self.redis.hset(keys.WORKER_IMAGES, worker, report.encode())

    def unrunnable_images(self, names: Iterable[str], *, ttl_s: float) -> dict[str, str] | None:
        """The image names no live worker can run, each with every worker's reason; None
        when no worker is live.

        A live worker runs an image when it reports no problem and its image report (if
        it sent one within `ttl_s`) lists the image as runnable; a healthy worker without a
        fresh report checked all its images when it started. No live worker at all says
        nothing about images (they may be starting): that is `/readyz`'s to report.
        """
        wanted = list(dict.fromkeys(names))
        workers = self.live_workers(ttl_s)
        if not workers:
            return None
        if not wanted:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(keys.WORKER_PROBLEMS, workers)
        pipe.hmget(keys.WORKER_IMAGES, workers)
        problem_values, report_values = pipe.execute()
        reasons: dict[str, list[str]] = {name: [] for name in wanted}
        runnable: set[str] = set()
        now = time.time()
        for worker, problem, raw in zip(workers, problem_values, report_values, strict=True):
            if problem:
                for name in wanted:
                    reasons[name].append(f"{worker}: {as_text(problem)}")
                continue
            report = ImageReport.decode(as_text(raw)) if raw else None
            if report is None or now - report.at > ttl_s:
                runnable.update(wanted)  # checked at start; no newer word
                break
            for name in wanted:
                if name not in report.images:
                    reasons[name].append(f"{worker}: not configured on this worker")
                elif report.images[name] is None:
                    runnable.add(name)
                else:
                    reasons[name].append(f"{worker}: {report.images[name]}")
        return {name: "; ".join(why) for name, why in reasons.items() if name not in runnable}
