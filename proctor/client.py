"""The typed HTTP client, sync and async. Depends only on httpx and the wire models.

    with Client("http://127.0.0.1:8000") as proctor:
        result = proctor.run(EpisodeCreate(task=..., solution=...))
        print(result.reward, result.verdict)

Errors:

    ProctorError            anything this client raises
    ├── ApiError            the service refused the request (4xx); `.status`, `.body`
    │   └── Overloaded      429: the queue is full; `.retry_after` seconds
    └── Unavailable         the service or its infrastructure did not answer (5xx, network)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from proctor.models import (
    EpisodeCreate,
    EpisodeCreated,
    EpisodePage,
    EpisodeRegrade,
    EpisodeResult,
    EpisodeResults,
    GiveUpAction,
    InteractiveAction,
    RepoCreated,
    ScreenItem,
    ScreenRequest,
    ScreenVerdict,
    StepResult,
    TestSpec,
)
from proctor.prefetch import PrefetchCreate, PrefetchPublic
from proctor.repo_refs import UPLOAD_PATH, RepoRefs, upload_body

__all__ = ["ApiError", "AsyncClient", "Client", "Overloaded", "ProctorError", "Unavailable"]

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_S = 330.0  # above the longest server-side wait


class ProctorError(Exception):
    pass


class ApiError(ProctorError):
    def __init__(self, status: int, body: Any) -> None:
        message = body.get("error", {}).get("message") if isinstance(body, dict) else body
        super().__init__(f"{status}: {message}")
        self.status = status
        self.body = body


class Overloaded(ApiError):
    def __init__(self, status: int, body: Any, retry_after: float) -> None:
        super().__init__(status, body)
        self.retry_after = retry_after


class Unavailable(ProctorError):
    pass


def _check(response: httpx.Response) -> Any:
    if response.status_code < 400:
        return response.json()
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    if response.status_code == 429:
        raise Overloaded(response.status_code, body, _retry_after(response))
    if response.status_code >= 500:
        raise Unavailable(f"{response.status_code}: {body}")
    raise ApiError(response.status_code, body)


def _retry_after(response: httpx.Response) -> float:
    """`Retry-After` in seconds (the service sends whole seconds; an HTTP date or none: 1)."""
    try:
        return max(float(response.headers.get("Retry-After", "1")), 0.0)
    except ValueError:
        return 1.0


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _created_or_result(data: dict[str, Any]) -> EpisodeResult | EpisodeCreated:
    if "reward" in data or "verdict" in data:
        return EpisodeResult.model_validate(data)
    return EpisodeCreated.model_validate(data)


class Client:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        upload_repos: bool = True,
    ) -> None:
        """`upload_repos`: send each distinct inline repository once (`upload_repo`), and
        its reference after that (`proctor.repo_refs`)."""
        self._http = httpx.Client(
            base_url=base_url, headers=_headers(token), timeout=timeout_s, transport=transport
        )
        self._repos = RepoRefs()
        self._repos.supported = upload_repos

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return _check(self._http.request(method, path, **kwargs))
        except httpx.TransportError as exc:
            raise Unavailable(f"cannot reach Proctor: {exc}") from exc

    def upload_repo(self, data: bytes, *, base_commit: str, branch: str = "main") -> RepoCreated:
        """Seal a repository (a tar, plain or gzip, or a git bundle) once; name it in a task
        by `RepoSnapshot(ref=answer.ref)`."""
        params = {"base_commit": base_commit, "branch": branch}
        headers = {"content-type": "application/octet-stream"}
        answer = self._request("POST", UPLOAD_PATH, content=data, params=params, headers=headers)
        return RepoCreated.model_validate(answer)

    def _by_ref(self, episodes: Sequence[EpisodeCreate]) -> list[EpisodeCreate]:
        for key, repo in self._repos.pending(list(episodes)).items():
            data, query = upload_body(repo)
            try:
                self._repos.refs[key] = self.upload_repo(data, **query).ref
            except ApiError as exc:
                if exc.status not in (404, 405):  # a service without uploads: send inline
                    raise
                self._repos.supported = False
        return [self._repos.swap(e) for e in episodes]

    def create(
        self, episode: EpisodeCreate, *, wait_s: float = 0
    ) -> EpisodeResult | EpisodeCreated:
        [episode] = self._by_ref([episode])
        params = {"wait": wait_s} if wait_s else None
        data = self._request(
            "POST", "/v1/episodes", json=episode.model_dump(mode="json"), params=params
        )
        return _created_or_result(data)

    def create_many(self, episodes: Sequence[EpisodeCreate]) -> list[str]:
        body = {"episodes": [e.model_dump(mode="json") for e in self._by_ref(episodes)]}
        return list(self._request("POST", "/v1/episodes/batch", json=body)["ids"])

    def get(self, episode_id: str, *, wait_s: float = 0) -> EpisodeResult:
        params = {"wait": wait_s} if wait_s else None
        return EpisodeResult.model_validate(
            self._request("GET", f"/v1/episodes/{episode_id}", params=params)
        )

    def get_many(self, episode_ids: Sequence[str], *, wait_s: float = 0) -> EpisodeResults:
        """Many at once; with `wait_s`, once all ended (or the wait ran out: see `pending`)."""
        params = {"wait": wait_s} if wait_s else None
        body = {"ids": list(episode_ids)}
        return EpisodeResults.model_validate(
            self._request("POST", "/v1/episodes/results", json=body, params=params)
        )

    def cancel(self, episode_id: str) -> EpisodeResult:
        return EpisodeResult.model_validate(self._request("DELETE", f"/v1/episodes/{episode_id}"))

    def run(self, episode: EpisodeCreate, *, timeout_s: float = 600) -> EpisodeResult:
        """Create an episode and wait for its result (server-side waits, no polling). A
        full queue's 429 is waited out as its `Retry-After` says, while `timeout_s` allows;
        past that, `Overloaded` is raised."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                left = deadline - time.monotonic()
                created = self.create(episode, wait_s=min(max(left, 1), 300))
                break
            except Overloaded as exc:
                if time.monotonic() + exc.retry_after > deadline:
                    raise
                time.sleep(exc.retry_after)
        if isinstance(created, EpisodeResult):
            return created
        while True:
            result = self.get(created.id, wait_s=min(max(deadline - time.monotonic(), 1), 300))
            if result.status.terminal or time.monotonic() >= deadline:
                return result

    def act(self, episode_id: str, action: InteractiveAction) -> StepResult:
        data = self._request(
            "POST", f"/v1/episodes/{episode_id}/actions", json=_dump_action(action)
        )
        return StepResult.model_validate(data)

    def give_up(self, episode_id: str, reason: str = "") -> EpisodeResult:
        """End the episode as given up (the policy's `give_up_reward`, no grading)."""
        self.act(episode_id, GiveUpAction(reason=reason))
        return self.get(episode_id)

    def finish(self, episode_id: str) -> EpisodeResult:
        return EpisodeResult.model_validate(
            self._request("POST", f"/v1/episodes/{episode_id}/finish")
        )

    def prefetch_images(self, images: Sequence[str]) -> PrefetchPublic:
        """Warm every worker host for these image references; poll `prefetch_progress`."""
        body = PrefetchCreate(images=list(images)).model_dump(mode="json")
        data = self._request("POST", "/v1/images/prefetch", json=body)
        return PrefetchPublic.model_validate(data)

    def prefetch_progress(self, prefetch_id: str) -> PrefetchPublic:
        data = self._request("GET", f"/v1/images/prefetch/{prefetch_id}")
        return PrefetchPublic.model_validate(data)

    def screen(self, items: Sequence[ScreenItem]) -> list[ScreenVerdict]:
        body = ScreenRequest(items=list(items)).model_dump(mode="json", exclude_none=True)
        data = self._request("POST", "/v1/screen", json=body)
        return [ScreenVerdict.model_validate(v) for v in data["verdicts"]]

    def regrade(
        self, episode_id: str, *, wait_s: float = 0, tests: TestSpec | None = None
    ) -> EpisodeRegrade:
        """Grade a finished episode again (a new episode): the old result and the new one."""
        params = {"wait": wait_s} if wait_s else None
        body = {"tests": tests.model_dump(mode="json")} if tests is not None else None
        data = self._request("POST", f"/v1/episodes/{episode_id}/regrade", params=params, json=body)
        return EpisodeRegrade.model_validate(data)

    def export(
        self,
        *,
        verdicts: Sequence[str] = (),
        since: str | None = None,
        until: str | None = None,
        format: str = "jsonl",
        limit: int | None = None,
    ) -> Iterator[bytes]:
        """The finished episodes as a dataset, streamed (JSON Lines or Parquet bytes)."""
        params: dict[str, Any] = {"format": format}
        if verdicts:
            params["verdict"] = list(verdicts)
        params |= {k: v for k, v in (("since", since), ("until", until), ("limit", limit)) if v}
        try:
            with self._http.stream("GET", "/v1/episodes/export", params=params) as response:
                if response.status_code >= 400:
                    response.read()
                    _check(response)
                yield from response.iter_bytes()
        except httpx.TransportError as exc:
            raise Unavailable(f"cannot reach Proctor: {exc}") from exc

    def list_episodes(
        self,
        *,
        verdict: str | None = None,
        mode: str | None = None,
        trainer: str | None = None,
        meta: Sequence[str] = (),
        since: str | None = None,
        until: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> EpisodePage:
        """A page of ended episodes, newest first (pass `next_cursor` back for the next)."""
        given = {"verdict": verdict, "mode": mode, "trainer": trainer, "since": since}
        given |= {"until": until, "cursor": cursor}
        params: dict[str, Any] = {k: v for k, v in given.items() if v}
        params["limit"] = limit
        if meta:
            params["meta"] = list(meta)
        return EpisodePage.model_validate(self._request("GET", "/v1/episodes", params=params))

    def metrics(self) -> str:
        """The Prometheus exposition (`/metrics`): the live counts."""
        try:
            response = self._http.get("/metrics")
        except httpx.TransportError as exc:
            raise Unavailable(f"cannot reach Proctor: {exc}") from exc
        if response.status_code >= 400:
            _check(response)
        return response.text


class AsyncClient:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 256,
        upload_repos: bool = True,
    ) -> None:
        self._repos = RepoRefs()
        self._repos.supported = upload_repos
        self._uploading = asyncio.Lock()  # one upload of a repository, however many ask
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=_headers(token),
            timeout=timeout_s,
            transport=transport,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return _check(await self._http.request(method, path, **kwargs))
        except httpx.TransportError as exc:
            raise Unavailable(f"cannot reach Proctor: {exc}") from exc

    async def upload_repo(
        self, data: bytes, *, base_commit: str, branch: str = "main"
    ) -> RepoCreated:
        """As `Client.upload_repo`."""
        params = {"base_commit": base_commit, "branch": branch}
        headers = {"content-type": "application/octet-stream"}
        answer = await self._request(
            "POST", UPLOAD_PATH, content=data, params=params, headers=headers
        )
        return RepoCreated.model_validate(answer)

    async def _by_ref(self, episodes: Sequence[EpisodeCreate]) -> list[EpisodeCreate]:
        if self._repos.pending(list(episodes)):
            async with self._uploading:
                for key, repo in self._repos.pending(list(episodes)).items():
                    data, query = upload_body(repo)
                    try:
                        self._repos.refs[key] = (await self.upload_repo(data, **query)).ref
                    except ApiError as exc:
                        if exc.status not in (404, 405):
                            raise
                        self._repos.supported = False
        return [self._repos.swap(e) for e in episodes]

    async def create(
        self, episode: EpisodeCreate, *, wait_s: float = 0
    ) -> EpisodeResult | EpisodeCreated:
        [episode] = await self._by_ref([episode])
        params = {"wait": wait_s} if wait_s else None
        data = await self._request(
            "POST", "/v1/episodes", json=episode.model_dump(mode="json"), params=params
        )
        return _created_or_result(data)

    async def create_many(self, episodes: Sequence[EpisodeCreate]) -> list[str]:
        body = {"episodes": [e.model_dump(mode="json") for e in await self._by_ref(episodes)]}
        return list((await self._request("POST", "/v1/episodes/batch", json=body))["ids"])

    async def get(self, episode_id: str, *, wait_s: float = 0) -> EpisodeResult:
        params = {"wait": wait_s} if wait_s else None
        return EpisodeResult.model_validate(
            await self._request("GET", f"/v1/episodes/{episode_id}", params=params)
        )

    async def get_many(self, episode_ids: Sequence[str], *, wait_s: float = 0) -> EpisodeResults:
        params = {"wait": wait_s} if wait_s else None
        body = {"ids": list(episode_ids)}
        return EpisodeResults.model_validate(
            await self._request("POST", "/v1/episodes/results", json=body, params=params)
        )

    async def cancel(self, episode_id: str) -> EpisodeResult:
        return EpisodeResult.model_validate(
            await self._request("DELETE", f"/v1/episodes/{episode_id}")
        )

    async def run(self, episode: EpisodeCreate, *, timeout_s: float = 600) -> EpisodeResult:
        """`Client.run`: a 429 is waited out as its `Retry-After` says, within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                left = deadline - time.monotonic()
                created = await self.create(episode, wait_s=min(max(left, 1), 300))
                break
            except Overloaded as exc:
                if time.monotonic() + exc.retry_after > deadline:
                    raise
                await asyncio.sleep(exc.retry_after)
        if isinstance(created, EpisodeResult):
            return created
        while True:
            remaining = max(deadline - time.monotonic(), 1)
            result = await self.get(created.id, wait_s=min(remaining, 300))
            if result.status.terminal or time.monotonic() >= deadline:
                return result

    async def act(self, episode_id: str, action: InteractiveAction) -> StepResult:
        data = await self._request(
            "POST", f"/v1/episodes/{episode_id}/actions", json=_dump_action(action)
        )
        return StepResult.model_validate(data)

    async def give_up(self, episode_id: str, reason: str = "") -> EpisodeResult:
        """As `Client.give_up`."""
        await self.act(episode_id, GiveUpAction(reason=reason))
        return await self.get(episode_id)

    async def finish(self, episode_id: str) -> EpisodeResult:
        return EpisodeResult.model_validate(
            await self._request("POST", f"/v1/episodes/{episode_id}/finish")
        )

    async def screen(self, items: Sequence[ScreenItem]) -> list[ScreenVerdict]:
        body = ScreenRequest(items=list(items)).model_dump(mode="json", exclude_none=True)
        data = await self._request("POST", "/v1/screen", json=body)
        return [ScreenVerdict.model_validate(v) for v in data["verdicts"]]


def _dump_action(action: InteractiveAction) -> dict[str, Any]:
    return action.model_dump(mode="json")
