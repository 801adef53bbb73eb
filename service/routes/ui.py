"""The operators' web page at /ui: live counts, episodes and their evidence, the rules.

Server-rendered (Jinja2, autoescaped: everything a sandbox produced is shown as text) from
the catalog (service/catalog.py), the store and the counters /metrics reads. Same tokens as
the API: a bearer header works, and a browser signs in once with a form; its cookie holds
an HMAC of the token (never the token), HttpOnly and SameSite=Strict. With no tokens
configured the page is open, as the API is. Handlers are sync: they run in the threadpool,
where the blocking Redis client belongs.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from anticheat.rules.registry import RULES
from core import latency
from proctor.models import Decision, EpisodeMode, EvidenceSource, Verdict
from service.catalog import Catalog, EpisodeFilter, InvalidFilter
from service.deps import ResourcesDep
from service.ui import charts

UI = Path(__file__).resolve().parent.parent / "ui"
STATIC = {"ui.css": "text/css", "ui.js": "text/javascript"}
COOKIE = "proctor_ui"
SESSION_CONTEXT = b"proctor-ui-session"

router = APIRouter(prefix="/ui", include_in_schema=False)

templates = Environment(
    loader=FileSystemLoader(UI / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _secs(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


templates.filters["when"] = _when
templates.filters["secs"] = _secs
templates.globals["color"] = charts.color


# ---------------------------------------------------------------------- sign-in


def session_value(token: str) -> str:
    """What the cookie holds for a token: a keyed hash, so the page never carries a token."""
    return hmac.new(token.encode(), SESSION_CONTEXT, hashlib.sha256).hexdigest()


def _signed_in(request: Request, tokens: list[str]) -> bool:
    if not tokens:
        return True
    header = request.headers.get("authorization", "")
    scheme, _, offered = header.partition(" ")
    if (
        scheme.lower() == "bearer"
        and offered
        and any(hmac.compare_digest(offered.encode(), t.encode()) for t in tokens)
    ):
        return True
    cookie = request.cookies.get(COOKIE, "")
    return bool(cookie) and any(
        hmac.compare_digest(cookie.encode(), session_value(t).encode()) for t in tokens
    )


def _safe_next(raw: str | None) -> str:
    """Only a path of this page: a sign-in never redirects anywhere else."""
    if raw and raw.startswith("/ui") and not raw.startswith("//"):
        return raw
    return "/ui"


def _page(name: str, status: int = 200, /, **context: Any) -> HTMLResponse:
    html = templates.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status)


def _guard(request: Request, resources: ResourcesDep) -> Response | None:
    """None when the request may see the page, else where it goes to sign in."""
    if _signed_in(request, resources.settings.api_tokens):
        return None
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/ui/login?{urlencode({'next': target})}", status_code=303)


@router.get("/login")
def login_form(request: Request, next: str | None = None) -> HTMLResponse:
    return _page("login.html", next=_safe_next(next), error=None, nav=None)


@router.post("/login")
async def login(request: Request) -> Response:
    form = parse_qs((await request.body()).decode(errors="replace"))
    token = (form.get("token") or [""])[0]
    target = _safe_next((form.get("next") or [""])[0])
    tokens: list[str] = request.app.state.resources.settings.api_tokens
    if tokens and not any(hmac.compare_digest(token.encode(), t.encode()) for t in tokens):
        return _page("login.html", 401, next=target, error="that token is not valid", nav=None)
    response = RedirectResponse(target, status_code=303)
    if tokens:
        response.set_cookie(
            COOKIE,
            session_value(token),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/ui",
        )
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        return _page("error.html", 404, message="no such file", nav=None)
    return FileResponse(UI / "static" / name, media_type=STATIC[name])


# ---------------------------------------------------------------------- overview


def _catalog(resources: ResourcesDep) -> Catalog:
    return Catalog(resources.redis, ttl_s=resources.settings.result_ttl_s)


def _histogram_quantile(raw: Mapping[str, float], q: float) -> float | None:
    return latency.quantile(latency.counts(raw), int(raw.get("count", 0)), q)


@router.get("", response_class=HTMLResponse)
def overview(request: Request, resources: ResourcesDep) -> Response:
    if (redirect := _guard(request, resources)) is not None:
        return redirect
    store, catalog = resources.store, _catalog(resources)
    verdicts, latencies = store.stats()
    last_minute, last_5 = catalog.verdict_counts(60), catalog.verdict_counts(300)
    workers = store.live_workers(resources.settings.heartbeat_ttl_s)
    minutes = catalog.minutes(last=60)
    labels = [datetime.fromtimestamp(m.minute * 60, UTC).strftime("%H:%M") for m in minutes]
    total = latencies.get("total", {})
    pictures = [
        charts.lines(
            "Episodes ended per minute", {"ended": [float(m.ended) for m in minutes]}, labels
        ),
        charts.lines(
            "Latency per minute (end to end)",
            {
                "p50": [m.p50_s for m in minutes],
                "p95": [m.p95_s for m in minutes],
                "mean": [m.mean_s for m in minutes],
            },
            labels,
            unit=" s",
        ),
        charts.stacked("Verdicts per minute", [m.verdicts for m in minutes], labels),
        charts.bars(
            "Cheat categories seen (episodes, within the result TTL)", catalog.categories()
        ),
    ]
    names = sorted(set(verdicts) | set(last_5), key=lambda v: (-verdicts.get(v, 0), v))
    rows = [
        {
            "verdict": v,
            "total": verdicts.get(v, 0),
            "per_min_1": last_minute.get(v, 0),
            "per_min_5": last_5.get(v, 0) / 5,
        }
        for v in names
    ]
    return _page(
        "overview.html",
        nav="overview",
        rows=rows,
        ended=sum(verdicts.values()),
        queue_depth=resources.queue.depth(),
        active=store.active_count(),
        workers=workers,
        problems=store.worker_problems(workers),
        p50=_histogram_quantile(total, 0.5),
        p95=_histogram_quantile(total, 0.95),
        pictures=pictures,
        now=time.time(),
    )


# ---------------------------------------------------------------------- episodes


@router.get("/episodes", response_class=HTMLResponse)
def episodes(
    request: Request,
    resources: ResourcesDep,
    verdict: str | None = None,
    mode: str | None = None,
    trainer: str | None = None,
    meta: Annotated[list[str] | None, Query()] = None,
    since: str | None = None,
    until: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> Response:
    if (redirect := _guard(request, resources)) is not None:
        return redirect
    form = {
        "verdict": verdict or "",
        "mode": mode or "",
        "trainer": trainer or "",
        "meta": " ".join(meta or []),
        "since": since or "",
        "until": until or "",
    }
    # one text box may hold several pairs, separated by spaces
    pairs = [p for item in meta or [] for p in item.split()]
    choices = {"verdicts": [v.value for v in Verdict], "modes": [m.value for m in EpisodeMode]}
    try:
        flt = EpisodeFilter.parse(
            verdict=verdict, mode=mode, trainer=trainer, meta=pairs, since=since, until=until
        )
        catalog = _catalog(resources)
        page = catalog.list(flt, limit=limit, cursor=cursor)
        count = catalog.count(flt)
    except InvalidFilter as exc:
        return _page("episodes.html", 422, nav="episodes", form=form, error=exc.message, **choices)
    next_link = None
    if page.next_cursor:
        query = {k: v for k, v in form.items() if v and k != "meta"}
        query |= {"cursor": page.next_cursor, "limit": str(limit)}
        next_link = "/ui/episodes?" + urlencode(
            [*query.items(), *(("meta", p) for p in pairs)], doseq=True
        )
    return _page(
        "episodes.html",
        nav="episodes",
        form=form,
        error=None,
        page=page,
        count=count,
        next_link=next_link,
        **choices,
    )


@router.get("/episodes/{episode_id}", response_class=HTMLResponse)
def episode(request: Request, resources: ResourcesDep, episode_id: str) -> Response:
    if (redirect := _guard(request, resources)) is not None:
        return redirect
    record = resources.store.get(episode_id)
    if record is None:
        return _page(
            "error.html",
            404,
            nav="episodes",
            message=f"no episode {episode_id} (unknown, or its result expired)",
        )
    result = record.public()
    steps = result.steps or (
        resources.store.steps(episode_id) if record.request.mode is EpisodeMode.interactive else []
    )
    evidence = {s: [e for e in result.cheat.evidence if e.source is s] for s in EvidenceSource}
    return _page(
        "episode.html",
        nav="episodes",
        record=record,
        result=result,
        steps=steps,
        rewards=result.step_rewards,
        evidence=evidence,
        request_json=record.request.model_dump_json(indent=2, exclude={"task": {"repo"}}),
    )


# ---------------------------------------------------------------------- rules


@router.get("/rules", response_class=HTMLResponse)
def rules(request: Request, resources: ResourcesDep) -> Response:
    if (redirect := _guard(request, resources)) is not None:
        return redirect
    hits = _catalog(resources).rule_hits()
    rows = [
        {
            "id": r.id,
            "category": r.category.value,
            "decision": r.decision.value,
            "level": r.level.value,
            "fallback": r.fallback.value if r.decision is Decision.review else "",
            "description": r.description,
            "hits": hits.get(r.id, 0),
        }
        for r in RULES
    ]
    known = {r.id for r in RULES}
    # hits of rules no longer in the table (renamed or removed since) stay visible
    rows += [
        {
            "id": rid,
            "category": "",
            "decision": "",
            "level": "",
            "fallback": "",
            "description": "(not in the table now)",
            "hits": n,
        }
        for rid, n in sorted(hits.items())
        if rid not in known
    ]
    return _page("rules.html", nav="rules", rows=rows, total=sum(hits.values()))
