"""The prediction API (``autofe serve``): the registry's active model over HTTP.

FastAPI and uvicorn are imported only by the ``serve*`` modules. Outermost first:

- :mod:`~autofe.pipelines.serve_guard`: a plain ASGI middleware for the bearer token (when
  one is set), the request size limit, and the request counters and latency histogram (it
  sees every request, including the ones it refuses and the ones no route matches);
- :mod:`~autofe.pipelines.serve_routes`: thin routes that read JSON bodies strictly
  (:mod:`~autofe.pipelines.serve_json`: no ``NaN``, no lone surrogate), validate with the
  pydantic models of :mod:`~autofe.pipelines.serve_models` and delegate to one ``Service``;
- :mod:`~autofe.pipelines.serve_service`: ``Service`` and ``LiveModel``, which know nothing of
  HTTP: predictions (features given or computed against ``HOME/warehouse.duckdb``),
  recommendations, actuals, and the active model, swapped for a newly promoted one without a
  pause;
- :mod:`~autofe.pipelines.serve_ui`: the read-only ``/ui`` dashboard (Model, Predictions,
  Scheduler pages, server-rendered HTML with inline SVG charts), behind the same token.

Every error autofe raises becomes a JSON body ``{"error", "detail"}`` with a 4xx status (503
when the warehouse or the model is unavailable), never a 500 with a traceback
(:mod:`~autofe.pipelines.serve_errors`). This module only wires them: :func:`create_app`
and :func:`serve`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from fastapi import FastAPI

from autofe import __version__
from autofe.errors import ConfigError, ModelError
from autofe.pipelines.home import Home
from autofe.pipelines.serve_errors import add_error_handlers
from autofe.pipelines.serve_guard import MAX_BODY_BYTES, Guard
from autofe.pipelines.serve_metrics import LEDGER_SIZE
from autofe.pipelines.serve_routes import router, service_of
from autofe.pipelines.serve_service import POLL_SECONDS, LiveModel, Service
from autofe.pipelines.serve_ui import ui_router
from autofe.scheduler.catalog import Catalog

log = logging.getLogger(__name__)

TOKEN_ENV = "AUTOFE_API_TOKEN"


def create_app(
    home: Path,
    token: str | None = None,
    *,
    poll_s: float = POLL_SECONDS,
    max_body_bytes: int = MAX_BODY_BYTES,
    ledger_size: int = LEDGER_SIZE,
    catalog: Catalog | None = None,
) -> FastAPI:
    """The API over the autofe home folder ``home``.

    Args:
        home: The home folder (``warehouse.duckdb``, ``models/``, ``actuals.jsonl``).
        token: Bearer token every endpoint but ``/healthz`` requires (the ``/ui`` pages take
            it as a cookie too); ``None`` reads ``AUTOFE_API_TOKEN`` (unset or empty: no
            token).
        poll_s: At most how often the active pointer is checked.
        max_body_bytes: Larger request bodies get 413.
        ledger_size: Predictions remembered for scoring against reported actuals.
        catalog: Instance catalog the scheduler plans submitted jobs on (default: shipped).
    """
    token = token if token is not None else os.environ.get(TOKEN_ENV) or None
    service = Service(home, poll_s, ledger_size, catalog)
    app = FastAPI(
        title="autofe prediction API",
        version=__version__,
        description="Spark / Databricks job durations predicted before submission.",
    )
    app.state.service = service
    app.state.token = token
    app.include_router(router)
    app.include_router(ui_router)
    add_error_handlers(app)
    routes = [*app.routes, *router.routes, *ui_router.routes]  # an included router is opaque
    paths = frozenset(path for route in routes if (path := getattr(route, "path", None)))
    app.add_middleware(Guard, service=service, token=token, max_body=max_body_bytes, paths=paths)
    return app


def serve(home: Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the API with uvicorn until interrupted.

    Raises:
        ConfigError: ``home`` is not a folder.
        ModelError: no version is active, or the active one does not load.
    """
    import uvicorn

    if not home.is_dir():
        raise ConfigError(f"home folder {home} does not exist: run `autofe nightly --home` first")
    registry = Home(home).registry
    if registry.active() is None:
        raise ModelError(f"no model is active in {registry.root}: promote one first")
    app = create_app(home)
    live: LiveModel = service_of(app).live
    if live.version is None:
        raise ModelError(live.error or "the active model did not load")
    if not Home(home).warehouse.is_file():
        log.warning(
            "%s is missing: only predictions with features given will work", Home(home).warehouse
        )
    uvicorn.run(app, host=host, port=port, log_level="info")
