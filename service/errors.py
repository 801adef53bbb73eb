"""API errors, mapped to HTTP in one handler.

    ApiError                 a request we refuse; carries its HTTP status
    ├── BadRequest           400/422: the request is malformed or asks for something we don't offer
    ├── Unauthorized         401: a token is required and was missing or wrong
    ├── NotFound             404: no such episode (or it expired)
    ├── Conflict             409: the episode is in a state that does not allow this
    ├── PayloadTooLarge      413
    └── Overloaded           429: the queue is over its bound; retry after a while
    ServiceUnavailable       503: our infrastructure (Redis) is not answering

Errors of the code under test are never exceptions here: they are verdicts in a result.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError


class ApiError(Exception):
    status_code = 400

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class BadRequest(ApiError):
    status_code = 422


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


def _error_body(kind: str, message: str, **extra: object) -> dict[str, object]:
    return {"error": {"type": kind, "message": message, **extra}}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        body = _error_body(type(exc).__name__, exc.message)
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

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

    @app.exception_handler(RedisError)
    async def _redis_down(_: Request, exc: RedisError) -> JSONResponse:
        return JSONResponse(
            _error_body("ServiceUnavailable", f"Redis is not answering: {exc}"),
            status_code=503,
            headers={"Retry-After": "5"},
        )
