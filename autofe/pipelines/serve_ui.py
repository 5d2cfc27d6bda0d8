"""The ``/ui`` dashboard's routes: three read-only pages and the login form.

Every page is a GET that reads what the server already holds
(:mod:`~autofe.pipelines.serve_ui_data`) and renders it (:mod:`~autofe.pipelines.serve_ui_pages`);
the one POST is the login, which only sets a cookie. The token itself is checked by the
:class:`~autofe.pipelines.serve_guard.Guard` (bearer header, or the cookie set here, on
``/ui`` paths). None of these routes is part of the API, so none is in the OpenAPI document.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from autofe.pipelines.serve_guard import TOKEN_COOKIE
from autofe.pipelines.serve_routes import ServiceDep
from autofe.pipelines.serve_ui_data import model_data, predictions_data, scheduler_data
from autofe.pipelines.serve_ui_pages import (
    login_page,
    model_page,
    predictions_page,
    scheduler_page,
)

ui_router = APIRouter(include_in_schema=False)
HOME_PAGE = "/ui/model"


@ui_router.get("/ui")
async def ui_root() -> RedirectResponse:
    return RedirectResponse(HOME_PAGE, status_code=307)


@ui_router.get("/ui/model")
def ui_model(service: ServiceDep) -> HTMLResponse:
    """Registry versions, nights, promotions, the served model's features."""
    return HTMLResponse(model_page(model_data(service)))


@ui_router.get("/ui/predictions")
def ui_predictions(service: ServiceDep) -> HTMLResponse:
    """Actuals against predictions, rolling MAPE and coverage, per-job drift."""
    return HTMLResponse(predictions_page(predictions_data(service)))


@ui_router.get("/ui/scheduler")
def ui_scheduler(service: ServiceDep) -> HTMLResponse:
    """Jobs, budgets with their projection, events."""
    return HTMLResponse(scheduler_page(scheduler_data(service)))


@ui_router.get("/ui/login")
async def ui_login_form(request: Request) -> Response:
    if _token(request) is None:
        return RedirectResponse(HOME_PAGE, status_code=303)
    return HTMLResponse(login_page())


@ui_router.post("/ui/login")
async def ui_login(request: Request) -> Response:
    """The form's ``token`` field: the pages with the cookie set when it matches, the form
    again (401) when it does not. The body is a plain urlencoded form, read here rather than
    by FastAPI's ``Form`` (which would add python-multipart to the ``api`` extra)."""
    token = _token(request)
    if token is None:
        return RedirectResponse(HOME_PAGE, status_code=303)
    fields = parse_qs((await request.body()).decode("utf-8", errors="replace"))
    given = (fields.get("token") or [""])[0].strip()
    if not hmac.compare_digest(given.encode(), token.encode()):
        return HTMLResponse(login_page(wrong=True), status_code=401)
    response = RedirectResponse(HOME_PAGE, status_code=303)
    response.set_cookie(
        TOKEN_COOKIE, quote(token, safe=""), path="/ui", httponly=True, samesite="strict"
    )
    return response


def _token(request: Request) -> str | None:
    token: str | None = request.app.state.token
    return token
