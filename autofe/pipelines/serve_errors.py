"""What an error becomes over HTTP: a JSON body ``{"error", "detail"}`` and a 4xx status.

Every error autofe raises (and every body that does not validate) is answered here, with 503
when the warehouse or the model is unavailable, never a 500 with a traceback. The batch route
answers each item's error the same way (:func:`error_body`), inside a 200.
"""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from autofe.errors import AutofeError, ConfigError, ModelError, ScheduleError, WarehouseError
from autofe.pipelines.serve_json import printable
from autofe.pipelines.serve_models import ErrorOut
from autofe.scheduler.store import StateConflict, UnknownHandle

ERROR_STATUS: tuple[tuple[type[AutofeError], int], ...] = (
    (UnknownHandle, 404),
    (StateConflict, 409),
    (ScheduleError, 422),
    (WarehouseError, 503),
    (ConfigError, 422),
    (ModelError, 422),
    (AutofeError, 400),
)
"""The first match wins: a run that contradicts the warehouse or a feature that cannot be
computed for it is the request's problem (422); an unreadable warehouse is the server's (503).
A job request the scheduler refuses is a 422 naming the job; an unknown handle a 404; a change
the job's state does not allow (cancelling a finished job) a 409."""


def error_body(exc: AutofeError | ValidationError) -> tuple[int, ErrorOut]:
    """The status and body an error becomes."""
    if isinstance(exc, ValidationError):
        fields = [_field_error(e["loc"], e["msg"]) for e in exc.errors()]
        detail = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
        return 422, ErrorOut(error="ValidationError", detail=detail, errors=fields)
    status = next(code for kind, code in ERROR_STATUS if isinstance(exc, kind))
    return status, ErrorOut(error=type(exc).__name__, detail=str(exc))


def _field_error(loc: Sequence[int | str], message: str) -> dict[str, str]:
    """A pydantic error as ``{"field": "items.0.job_id", "message": ...}`` (no "body." prefix).

    >>> _field_error(("body", "items", 0, "job_id"), "Field required")
    {'field': 'items.0.job_id', 'message': 'Field required'}
    """
    parts = [printable(str(p)) for p in loc]
    if parts[:1] == ["body"]:
        parts = parts[1:]
    message = printable(message).removeprefix("Value error, ")
    return {"field": ".".join(parts) or "body", "message": message}


async def _autofe_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AutofeError | ValidationError)
    status, body = error_body(exc)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status)


async def _invalid_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    fields = [_field_error(e["loc"], e["msg"]) for e in exc.errors()]
    detail = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
    body = ErrorOut(error="ValidationError", detail=detail, errors=fields)
    return JSONResponse(body.model_dump(), status_code=422)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    body = ErrorOut(error=status_phrase(exc.status_code), detail=str(exc.detail))
    return JSONResponse(body.model_dump(exclude_none=True), exc.status_code, exc.headers)


def status_phrase(status: int) -> str:
    """The standard reason phrase of an HTTP status, as the ``error`` of a refusal.

    >>> status_phrase(401)
    'Unauthorized'
    """
    return HTTPStatus(status).phrase


def add_error_handlers(app: FastAPI) -> None:
    """Answer autofe's errors, invalid bodies and HTTP errors as :class:`ErrorOut` bodies."""
    app.add_exception_handler(AutofeError, _autofe_error)
    app.add_exception_handler(ValidationError, _autofe_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(HTTPException, _http_error)
