"""API errors, mapped to HTTP in one handler.

    ApiError                 a request we refuse; carries its HTTP status
    ├── BadRequest           400/422: the request is malformed or asks for something we don't offer
    │   └── ImageNotFound    422: its image reference's registry says it does not exist
    ├── Unauthorized         401: a token is required and was missing or wrong
    ├── NotFound             404: no such episode (or it expired)
    ├── Conflict             409: the episode is in a state that does not allow this
    ├── PayloadTooLarge      413
    ├── Overloaded           429: the queue is over its bound; retry after a while
    ├── ServiceUnavailable   503: our infrastructure is not answering (Redis, or no live
    │                        worker can run the task's image); retry after a while
    └── GatewayTimeout       504: SandboxFusion's overload answer: the queue is longer than
                             the client waits (`service.overload`); retry after a while

Whatever answers an error — these, a request that fails validation, a body that cannot be
parsed (400), an unexpected failure of ours (500) — answers it in one envelope,
`ErrorResponse`, and every route documents the statuses it can answer (`error_responses`).
Errors of the code under test are never exceptions here: they are verdicts in a result.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException

from core.defaults import REDIS_DOWN_RETRY_AFTER_S

log = logging.getLogger(__name__)


class ErrorDetail(BaseModel):
    loc: list[str | int] = Field(description="where in the request: body, query, path, ...")
    msg: str
    type: str


class ErrorInfo(BaseModel):
    type: str = Field(description="the kind: ValidationError, NotFound, Overloaded, ...")
    message: str
    details: list[ErrorDetail] | None = Field(None, description="each validation failure")


class ErrorResponse(BaseModel):
    """The one shape of every error the API answers."""

    error: ErrorInfo


ERROR_DESCRIPTIONS = {
    400: "the body cannot be parsed (not UTF-8 text)",
    401: "a bearer token is required and was missing or wrong",
    404: "no such episode (unknown, or its result expired)",
    409: "the episode's state does not allow this",
    413: "the request body is over the deployment's limit",
    422: "the request is invalid, or asks what this deployment does not offer",
    429: "the queue is full; retry after `Retry-After` seconds",
    500: "our own failure (a bug); the request may be retried",
    503: "our infrastructure is not answering (Redis, or no live worker can run the image); "
    "retry after `Retry-After` seconds",
    504: "the queue is longer than the client waits for this request (SandboxFusion's "
    "overload answer, which its clients retry); retry after `Retry-After` seconds",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route that can answer these error statuses."""
    return {
        status: {"model": ErrorResponse, "description": ERROR_DESCRIPTIONS[status]}
        for status in statuses
    }


class ApiError(Exception):
    status_code = 400

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class BadRequest(ApiError):
    status_code = 422


class ImageNotFound(BadRequest):
    pass


class Unauthorized(ApiError):
    status_code = 401


class NotFound(ApiError):
    status_code = 404


class Conflict(ApiError):
    status_code = 409


class PayloadTooLarge(ApiError):
    status_code = 413


class Overloaded(ApiError):
    status_code = 429


class ServiceUnavailable(ApiError):
    status_code = 503


class GatewayTimeout(ApiError):
    status_code = 504


def _error_body(kind: str, message: str, **extra: object) -> dict[str, object]:
    return {"error": {"type": kind, "message": message, **extra}}


def _kind(status: int) -> str:
    """`Not Found` → `NotFound`: the envelope's type for errors starlette raises itself."""
    try:
        return HTTPStatus(status).phrase.replace(" ", "").replace("-", "")
    except ValueError:
        return "HTTPError"


def error_response(exc: ApiError) -> JSONResponse:
    """The answer to a refusal of ours, in the envelope."""
    body = _error_body(type(exc).__name__, exc.message)
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        summary = "; ".join(
            f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in details[:5]
        )
        return JSONResponse(
            _error_body("ValidationError", summary or "invalid request", details=details),
            status_code=422,
        )

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        # a body that is not UTF-8 (400), a path or method the API does not serve
        message = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return JSONResponse(
            _error_body(_kind(exc.status_code), message),
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
        )

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return JSONResponse(
            _error_body("InternalError", f"our own failure: {type(exc).__name__}"), status_code=500
        )

    @app.exception_handler(RedisError)
    async def _redis_down(_: Request, exc: RedisError) -> JSONResponse:
        return JSONResponse(
            _error_body("ServiceUnavailable", f"Redis is not answering: {exc}"),
            status_code=503,
            headers={"Retry-After": str(REDIS_DOWN_RETRY_AFTER_S)},
        )
