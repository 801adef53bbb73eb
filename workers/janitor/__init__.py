"""Keeping the books straight: heartbeats, abandoned episodes, orphaned containers.

Runs as two threads in every worker process (`Janitor`): the heartbeat, and a sweep every
few seconds whose duties are apart, one module each:
    heartbeat.py   this worker's heartbeat; whether others' silence is judged yet
    episodes.py    ending the episodes nobody else will (abandoned, never to start, lost,
                   expired)
    shares.py      giving back the shares of the host's budget nobody else will
    containers.py  removing sandboxes: of episodes that ended elsewhere, stopped ones,
                   those of workers that are gone
    images.py      re-checking the images this worker serves, published for the API
    processes.py   a worker's name, and whether a worker of this host still runs
    janitor.py     `Janitor`: the threads, and the order of a sweep's duties
The pools' idle sandboxes are drained at the end of each sweep (`IdlePool`).
"""

from __future__ import annotations

from workers.janitor.janitor import IdlePool, Janitor
from workers.janitor.processes import process_alive, process_start_ticks, worker_name

__all__ = ["IdlePool", "Janitor", "process_alive", "process_start_ticks", "worker_name"]
