"""The honeypot: a sandbox's only network peer, run as a container of its own.

`container` starts it and reads its log back as evidence; `assets/honeypot_server.py` is
the program that runs inside it (copied in, never imported here).
"""

from workers.honeypot.container import INERT, Hit, Honeypot, evidence

__all__ = ["INERT", "Hit", "Honeypot", "evidence"]
