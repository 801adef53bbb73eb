"""The web page over HTTP from `proctor serve` on a real Redis: escaping, sign-in, filters,
404 and 422 (episodes written through the store, as workers write them).

(tests/e2e/test_ui_browser.py drives the same pages in a real browser against a running
service with real episodes.)
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis

from core import endings
from core.store import EpisodeStore
from proctor.models import (
    BashAction,
    CheatCategory,
    CheatReport,
    EpisodeCreate,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    Level,
    Observation,
    Step,
    Verdict,
)
from service.routes.ui import COOKIE, session_value
from tests.conftest import emptied, running_api

TOKEN = "s3cret-token-for-the-page"
SCRIPT = "<script>window.pwned = 1</script>"


def finished(
    store: EpisodeStore, verdict: Verdict, *, output: str = "ok", trainer: str = "t1"
) -> str:
    request = EpisodeCreate.model_validate(
        {
            "mode": "interactive",
            "task": {"tests": {"files": {"t.py": "x"}}},
            "metadata": {"trainer": trainer},
        }
    )
    admission = store.create([request], dedup_keys=[None], max_queued=1000, dedup_ttl_s=60)
    record = store.get(admission.ids[0])
    assert record is not None
    step = Step(
        step=1,
        action=BashAction(command="git log --all"),
        observation=Observation(output=output, exit_code=0),
        intercepted=verdict is Verdict.cheat,
        rule="vcs.future-commits" if verdict is Verdict.cheat else None,
        category=CheatCategory.vcs_history if verdict is Verdict.cheat else None,
    )
    cheat = CheatReport(
        detected=verdict is Verdict.cheat,
        evidence=[
            Evidence(
                source=EvidenceSource.honeypot,
                category=CheatCategory.network_fetch,
                detail=f"contacted files.example.org {SCRIPT}",
                level=Level.attempt,
            ),
            Evidence(
                source=EvidenceSource.integrity,
                category=CheatCategory.test_tampering,
                detail="protected file modified: tests/test_x.py",
                level=Level.cheat,
                decisive=True,
            ),
        ]
        if verdict is Verdict.cheat
        else [],
    )
    result = endings.ended(
        record,
        EpisodeStatus.completed,
        verdict,
        reward=0.0,
        passed=False,
        steps=[step],
        cheat=cheat,
        reason=f"why {SCRIPT}",
    )
    assert store.finish(result)
    return record.id


@pytest.fixture
def client(redis_url: str, redis_client: redis.Redis) -> Iterator[httpx.Client]:
    emptied(redis_client)
    with (
        running_api(redis_url, PROCTOR_API_TOKENS=TOKEN) as url,
        httpx.Client(base_url=url, follow_redirects=False, timeout=30) as c,
    ):
        yield c


def signed_in(client: httpx.Client) -> httpx.Client:
    response = client.post("/ui/login", data={"token": TOKEN, "next": "/ui/episodes"})
    assert response.status_code == 303 and response.headers["location"] == "/ui/episodes"
    cookie = response.cookies[COOKIE]
    assert cookie == session_value(TOKEN) and TOKEN not in cookie
    assert "httponly" in response.headers["set-cookie"].lower()
    return client


@pytest.mark.redis
def test_the_page_needs_the_api_token_and_never_shows_it(client: httpx.Client) -> None:
    response = client.get("/ui/episodes")
    assert response.status_code == 303 and response.headers["location"].startswith("/ui/login")
    wrong = client.post("/ui/login", data={"token": "nope", "next": "/ui"})
    assert wrong.status_code == 401 and "not valid" in wrong.text
    assert (
        client.post("/ui/login", data={"token": TOKEN, "next": "https://evil.example"}).headers[
            "location"
        ]
        == "/ui"
    )  # no open redirect
    client.cookies.clear()
    assert client.get("/ui", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    signed_in(client)
    for path in ("/ui", "/ui/episodes", "/ui/rules"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert TOKEN not in page.text


@pytest.mark.redis
def test_sandbox_output_is_shown_as_text(client: httpx.Client, redis_client: redis.Redis) -> None:
    episode_id = finished(EpisodeStore(redis_client), Verdict.cheat, output=SCRIPT)
    page = signed_in(client).get(f"/ui/episodes/{episode_id}")
    assert page.status_code == 200
    assert SCRIPT not in page.text
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page.text
    assert "vcs.future-commits" in page.text and "files.example.org" in page.text
    # the evidence that decided the verdict is marked, and only it
    assert page.text.count("decided the verdict</span>") == 1
    assert page.text.count('class="decisive"') == 1


@pytest.mark.redis
def test_filters_unknown_ids_and_bad_filters(
    client: httpx.Client, redis_client: redis.Redis
) -> None:
    store = EpisodeStore(redis_client)
    cheat = finished(store, Verdict.cheat, trainer="a")
    failed = finished(store, Verdict.failed, trainer="b")
    signed_in(client)
    listed = client.get("/ui/episodes", params={"verdict": "cheat"}).text
    assert cheat in listed and failed not in listed
    listed = client.get("/ui/episodes", params={"trainer": "b"}).text
    assert failed in listed and cheat not in listed
    assert client.get("/ui/episodes/ep_nope").status_code == 404
    bad = client.get("/ui/episodes", params={"since": "last tuesday"})
    assert bad.status_code == 422 and "since: &#39;last tuesday&#39; is not a time" in bad.text
    rules = client.get("/ui/rules").text
    assert "vcs.future-commits" in rules
    row = rules[rules.index("<code>vcs.unresolved-revision</code>") :].split("</tr>")[0]
    assert ">attempt<" in row and ">oracle<" in row


@pytest.mark.redis
def test_an_episode_with_attempts_only_says_its_reward_is_merit(
    client: httpx.Client, redis_client: redis.Redis
) -> None:
    store = EpisodeStore(redis_client)
    request = EpisodeCreate.model_validate(
        {"mode": "interactive", "task": {"tests": {"files": {"t.py": "x"}}}}
    )
    admission = store.create([request], dedup_keys=[None], max_queued=1000, dedup_ttl_s=60)
    record = store.get(admission.ids[0])
    assert record is not None
    walk = Evidence(
        source=EvidenceSource.rule,
        category=CheatCategory.vcs_history,
        rule="vcs.all-refs",
        detail="vcs.all-refs: `git log --all`",
        step=1,
        level=Level.attempt,
    )
    result = endings.ended(
        record,
        EpisodeStatus.completed,
        Verdict.passed,
        reward=1.0,
        passed=True,
        cheat=CheatReport(detected=True, evidence=[walk]),
    )
    assert store.finish(result)
    page = signed_in(client).get(f"/ui/episodes/{record.id}").text
    assert "attempts only" in page and 'class="decisive"' not in page
