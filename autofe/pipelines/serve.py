"""The prediction API (``autofe serve``): the registry's active model over HTTP.

The only module that imports FastAPI and uvicorn. Three parts, outermost first:

- ``_Guard``, a plain ASGI middleware: the bearer token (when one is set), the request size
  limit, and the request counters and latency histogram (it sees every request, including the
  ones it refuses and the ones no route matches).
- thin routes that read JSON bodies strictly (:mod:`autofe.pipelines.serve_json`: no ``NaN``,
  no lone surrogate), validate with the pydantic models of :mod:`autofe.pipelines.serve_models`
  and delegate to one :class:`Service`;
- :class:`Service` and :class:`LiveModel`, which know nothing of HTTP: predictions (features
  given or computed against ``HOME/warehouse.duckdb``), recommendations, actuals, and the
  active model, swapped for a newly promoted one without a pause.

Every error autofe raises becomes a JSON body ``{"error", "detail"}`` with a 4xx status (503
when the warehouse or the model is unavailable), never a 500 with a traceback.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, Literal

import duckdb
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi import Path as FastApiPath
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autofe import __version__
from autofe.errors import (
    AutofeError,
    ConfigError,
    ModelError,
    ScheduleError,
    WarehouseError,
    first_line,
)
from autofe.modeling.artifact import Artifact
from autofe.modeling.predict import predict_pending, predict_values
from autofe.modeling.registry import Registry
from autofe.pipelines.home import Home
from autofe.pipelines.serve_json import BodyRefused, printable, read_json
from autofe.pipelines.serve_metrics import (
    CONTENT_TYPE,
    LEDGER_SIZE,
    ApiMetrics,
    PredictionLedger,
    Remembered,
    Scored,
    scheduler_lines,
)
from autofe.pipelines.serve_models import (
    ActualOut,
    ActualReport,
    Alternative,
    BatchItemOut,
    BatchOut,
    BatchRequest,
    Candidate,
    ErrorOut,
    HealthOut,
    JobEventReport,
    JobOut,
    JobsDocument,
    ModelsOut,
    PredictionOut,
    PredictRequest,
    RecommendOut,
    RecommendRequest,
    VersionOut,
    alternative,
    choose_configuration,
    feature_type_errors,
)
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.store import (
    JobStore,
    StateConflict,
    Summary,
    UnknownHandle,
    submit_document,
)
from autofe.warehouse.connect import schema_fingerprint

log = logging.getLogger(__name__)

TOKEN_ENV = "AUTOFE_API_TOKEN"
MAX_BODY_BYTES = 1 << 20
POLL_SECONDS = 1.0
OPEN_PATHS = frozenset({"/healthz"})
"""Load balancers probe health without credentials; everything else needs the token."""

PriceSource = Literal["request", "cluster", "warehouse"]


# ------------------------------------------------------------------------------ the model


@dataclass(frozen=True)
class Loaded:
    """One loaded model version: swapped as a whole, so a request never mixes two."""

    version: str
    artifact: Artifact
    loaded_at: str

    @cached_property
    def value_types(self) -> dict[str, str]:
        """Feature name → the SQL type of its values (what a given value is checked against)."""
        return {spec.name: spec.value_type for spec in self.artifact.specs}


class LiveModel:
    """The registry's active model, reloaded when the active pointer changes.

    The pointer's modification time is checked at most every ``poll_s`` seconds, by whichever
    request comes along. The request that sees a change loads the new version while every other
    request goes on with the old one (a single non-blocking lock); the new one is published by
    one reference assignment only once fully loaded. A version that fails to load leaves the old
    one serving and the reason in :attr:`error` until the pointer changes again.
    """

    def __init__(self, registry: Registry, metrics: ApiMetrics, poll_s: float = POLL_SECONDS):
        self._registry = registry
        self._metrics = metrics
        self._poll_s = poll_s
        self._schema = schema_fingerprint()
        self._loaded: Loaded | None = None
        self._stamp: bytes | None = None
        self._checked = -math.inf
        self._loading = threading.Lock()
        self.pointer: str | None = None
        """The version the active pointer named when last read."""
        self.error: str | None = None
        self.refresh()

    def current(self) -> Loaded | None:
        """The model to serve this request with (None before any version loaded)."""
        now = time.monotonic()
        if now - self._checked >= self._poll_s:
            self._checked = now
            if self._registry.active_stamp() != self._stamp:
                self.refresh()
        return self._loaded

    def refresh(self) -> None:
        """Load the version the pointer names unless it is served already or being loaded."""
        if not self._loading.acquire(blocking=False):
            return
        try:
            self._stamp = self._registry.active_stamp()
            self._load_active()
        finally:
            self._loading.release()

    def _load_active(self) -> None:
        try:
            version = self._registry.active()
            self.pointer = version.name if version else None
            if version is None or (self._loaded and self._loaded.version == version.name):
                return
            artifact = self._registry.load(version.name, self._schema)
        # Anything unpickling can raise (a model from another library version) must leave the
        # old model serving, so this boundary catches more than ModelError.
        except Exception as exc:
            self.error = f"cannot load the active model: {exc}"
            log.warning("%s; still serving %s", self.error, self.version or "nothing")
            self._metrics.observe_reload("failed")
            return
        self._loaded = Loaded(version.name, artifact, _now())
        self.error = None
        log.info("serving model %s", version.name)
        self._metrics.observe_reload("ok")

    @property
    def version(self) -> str | None:
        return self._loaded.version if self._loaded else None


# ---------------------------------------------------------------------------- the service


class Service:
    """What the API does, without HTTP: every route is one call of one method."""

    def __init__(
        self,
        home: Path,
        poll_s: float = POLL_SECONDS,
        ledger_size: int = LEDGER_SIZE,
        catalog: Catalog | None = None,
    ):
        self.home = Home(home)
        self.metrics = ApiMetrics()
        self.ledger = PredictionLedger(ledger_size)
        self.live = LiveModel(self.home.registry, self.metrics, poll_s)
        self.jobs = JobHandles(home, catalog)
        self._actuals_lock = threading.Lock()

    def predict(self, loaded: Loaded, request: PredictRequest) -> PredictionOut:
        """One prediction, features given by name or computed from the job spec.

        Raises:
            ConfigError: the job spec contradicts the warehouse.
            ModelError: a feature cannot be computed.
            WarehouseError: the warehouse cannot be read.
        """
        if request.features is not None:
            out = predict_given(loaded, request)
        else:
            pending = request.pending_run()
            prediction = predict_pending(loaded.artifact, self.home.warehouse, pending)
            out = PredictionOut.of(prediction, loaded.version, "computed")
        self.metrics.observe_predictions(out.feature_source)
        if request.run_id is not None:
            remembered = Remembered(out.job_id, out.p50_s, out.intervals, out.model_version)
            self.ledger.remember(request.run_id, remembered)
        return out

    def predict_item(self, loaded: Loaded, request: PredictRequest) -> BatchItemOut:
        """One batch item: its prediction, or the error it alone would have got."""
        try:
            return BatchItemOut(status=200, prediction=self.predict(loaded, request))
        except (AutofeError, ValidationError) as exc:
            status, body = error_body(exc)
            return BatchItemOut(status=status, error=body)

    def recommend(self, loaded: Loaded, request: RecommendRequest) -> RecommendOut:
        """Price every candidate and choose (see :func:`choose_configuration`).

        Raises:
            ConfigError: a candidate has no price, or contradicts the warehouse (named by
                its index).
        """
        prices = self._prices(request.candidates)
        alternatives = [
            self._alternative(loaded, request, i, candidate, prices[i])
            for i, candidate in enumerate(request.candidates)
        ]
        choice = choose_configuration(alternatives)
        self.metrics.observe_predictions("computed", len(alternatives))
        return RecommendOut(
            model_version=loaded.version,
            deadline_s=request.deadline_s,
            level=request.level,
            meets_deadline=choice.meets_deadline,
            choice=choice,
            alternatives=alternatives,
        )

    def report_actual(self, report: ActualReport) -> ActualOut:
        """Append the actual to ``HOME/actuals.jsonl`` and score this server's prediction of it.

        Raises:
            WarehouseError: the file cannot be appended to.
        """
        remembered = self.ledger.take(report.run_id)
        record = {
            **report.model_dump(mode="json"),
            "reported_at": _now(),
            "predicted_p50_s": remembered.p50_s if remembered else None,
            "model_version": remembered.version if remembered else None,
        }
        try:
            self._append(record)
        except OSError as exc:
            if remembered is not None:
                self.ledger.remember(report.run_id, remembered)
            raise WarehouseError(f"cannot append to {self.home.actuals}: {exc}") from exc
        scored = Scored(remembered, report.duration_s) if remembered else None
        self.metrics.observe_actual(scored)
        return ActualOut(
            run_id=report.run_id,
            recorded=True,
            matched=scored is not None,
            predicted_p50_s=remembered.p50_s if remembered else None,
            abs_pct_error=round(scored.abs_pct_error, 6) if scored else None,
            model_version=remembered.version if remembered else None,
        )

    def models(self) -> ModelsOut:
        self.live.current()
        registry = self.home.registry
        versions = registry.versions()
        return ModelsOut(
            active=self.live.pointer,
            serving=self.live.version,
            versions=[
                VersionOut(**v.as_dict(), active=v.name == self.live.pointer) for v in versions
            ],
            history=registry.history(),
        )

    def health(self) -> HealthOut:
        loaded = self.live.current()
        if loaded is None:
            status: Literal["ok", "stale", "no model"] = "no model"
        else:
            status = "ok" if loaded.version == self.live.pointer else "stale"
        return HealthOut(
            status=status,
            model_version=loaded.version if loaded else None,
            active_version=self.live.pointer,
            loaded_at=loaded.loaded_at if loaded else None,
            reload_error=self.live.error,
        )

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._actuals_lock, self.home.actuals.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def _prices(self, candidates: Sequence[Candidate]) -> list[tuple[float, PriceSource]]:
        wanted = {
            c.cluster_config_id
            for c in candidates
            if c.hourly_price is None and c.cluster is None and c.cluster_config_id
        }
        stored = warehouse_prices(self.home.warehouse, wanted)
        return [_price(i, c, stored) for i, c in enumerate(candidates)]

    def _alternative(
        self,
        loaded: Loaded,
        request: RecommendRequest,
        index: int,
        candidate: Candidate,
        price: tuple[float, PriceSource],
    ) -> Alternative:
        config = candidate.cluster_config_id
        pending = request.pending(request.submit_time, config, candidate.cluster)
        try:
            p = predict_pending(loaded.artifact, self.home.warehouse, pending)
        except (ConfigError, ModelError) as exc:
            raise type(exc)(f"candidates[{index}]: {exc}") from exc
        bound = p.intervals[request.level][1]
        return alternative(index, config, p.p50_s, bound, price, request.deadline_s)


class JobHandles:
    """The scheduler's job handles (``/v1/jobs``), without HTTP.

    The store (``HOME/scheduler.sqlite``) is created by the first submit, not by a scrape or
    a status request; the instance catalog is the shipped one unless ``create_app`` got one.
    """

    def __init__(self, home: Path, catalog: Catalog | None = None) -> None:
        self.path = Home(home).scheduler_store
        self._catalog = catalog
        self._store: JobStore | None = None
        self._lock = threading.Lock()

    def submit(self, body: JobsDocument) -> JobOut:
        """Validate, plan and store one job request.

        Raises:
            ScheduleError: the request is invalid (naming the job).
        """
        doc = body.model_dump(mode="json")
        (record,) = submit_document(self._open(), doc, self.catalog(), time.time())
        return JobOut.of(record)

    def get(self, handle: str) -> JobOut:
        return JobOut.of(self._existing(handle).get(handle))

    def cancel(self, handle: str) -> JobOut:
        return JobOut.of(self._existing(handle).cancel(handle))

    def report(self, handle: str, event: JobEventReport) -> JobOut:
        store = self._existing(handle)
        record = store.report(
            handle,
            event.kind,
            progress=event.progress,
            hourly_usd=event.hourly_usd,
            reason=event.reason,
        )
        return JobOut.of(record)

    def summary(self) -> Summary | None:
        """Spend, budgets and queue for the metrics (None before the first submit)."""
        return self._open().summary() if self.path.is_file() else None

    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog()
        return self._catalog

    def _existing(self, handle: str) -> JobStore:
        if not self.path.is_file():
            raise UnknownHandle(f"no job has handle {handle!r}: nothing was submitted here")
        return self._open()

    def _open(self) -> JobStore:
        with self._lock:
            if self._store is None:
                self._store = JobStore(self.path)
            return self._store


def predict_given(loaded: Loaded, request: PredictRequest) -> PredictionOut:
    """The fast path: a prediction from feature values given by name (the model alone).

    Raises:
        ValidationError: a value is not of the JSON type its feature reads.
    """
    check_given_types(loaded, [((), request)])
    values = request.features or {}
    run_id = request.run_id or "pending"
    prediction = predict_values(loaded.artifact, values, run_id, request.job_id)
    unknown = sorted(set(values) - set(prediction.features))
    return PredictionOut.of(prediction, loaded.version, "given", unknown)


def check_given_types(
    loaded: Loaded, requests: Sequence[tuple[tuple[str | int, ...], PredictRequest]]
) -> None:
    """Refuse values given for a feature in another JSON type than the model reads.

    Each request comes with where it is in the body (``("items", 3)`` in a batch, so a batch
    is refused whole, naming the item, as for any other body that does not validate).

    Raises:
        ValidationError: naming ``[items.<i>.]features.<name>`` for each value refused.
    """
    types = loaded.value_types
    errors = [
        InitErrorDetails(
            type=PydanticCustomError("feature_type", message),
            loc=(*where, "features", name),
            input=(request.features or {})[name],
        )
        for where, request in requests
        for name, message in feature_type_errors(types, request.features or {})
    ]
    if errors:
        raise ValidationError.from_exception_data(PredictRequest.__name__, errors)


def _price(
    index: int, candidate: Candidate, stored: dict[str, float | None]
) -> tuple[float, PriceSource]:
    if candidate.hourly_price is not None:
        return candidate.hourly_price, "request"
    if candidate.cluster is not None:
        if candidate.cluster.hourly_price is not None:
            return candidate.cluster.hourly_price, "cluster"
        raise ConfigError(f"candidates[{index}]: give 'hourly_price' for the new cluster")
    config = str(candidate.cluster_config_id)
    if config not in stored:
        raise ConfigError(
            f"candidates[{index}]: cluster_config_id {config!r} is not in the warehouse"
        )
    price = stored[config]
    if price is None:
        raise ConfigError(
            f"candidates[{index}]: the warehouse has no hourly_price for {config!r}: "
            "give 'hourly_price'"
        )
    return price, "warehouse"


def warehouse_prices(db: Path, config_ids: Collection[str]) -> dict[str, float | None]:
    """Config id → hourly price (None when unknown) of the ids the warehouse has.

    Raises:
        WarehouseError: the warehouse cannot be read.
    """
    if not config_ids:
        return {}
    if not db.is_file():
        raise WarehouseError(f"warehouse {db} does not exist: run `autofe nightly` first")
    con = duckdb.connect(":memory:")
    try:
        con.execute("ATTACH ? AS warehouse (READ_ONLY)", [str(db)])
        rows = con.execute(
            "SELECT config_id, hourly_price FROM warehouse.cluster_configs "
            "WHERE list_contains(?, config_id)",
            [sorted(config_ids)],
        ).fetchall()
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot read warehouse {db}: {first_line(exc)}") from exc
    finally:
        con.close()
    return {str(c): None if p is None else float(p) for c, p in rows}


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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------ HTTP


async def _service_dependency(request: Request) -> Service:
    """Async, so FastAPI resolves it on the event loop instead of a worker thread."""
    return _service_of(request.app)


ServiceDep = Annotated[Service, Depends(_service_dependency)]


class _StrictJSONRequest(Request):
    """A request whose JSON body is read by :func:`read_json`, not by ``json.loads``."""

    async def json(self) -> Any:
        if not hasattr(self, "_strict_json"):
            self._strict_json = read_json(await self.body())
        return self._strict_json


class _StrictJSONRoute(APIRoute):
    """Reads a JSON body strictly before FastAPI validates it.

    A non-finite number or a lone surrogate anywhere in the body (a key, a value, nested in
    ``parameters``) is a 422 naming the field, as any other validation error. FastAPI turns
    only ``JSONDecodeError`` raised while it reads the body into a 422 (anything else into a
    400 that names nothing), so the body is read here first; what is not JSON at all is left
    for FastAPI to answer as it always has.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            request = _StrictJSONRequest(request.scope, request.receive)
            if _declares_json(request.headers.get("content-type")):
                try:
                    await request.json()
                except BodyRefused as exc:
                    raise RequestValidationError(
                        [
                            {"type": "json_invalid", "loc": ("body", *p.loc), "msg": p.message}
                            for p in exc.problems
                        ]
                    ) from None
                except ValueError:
                    pass  # not JSON, or not UTF-8: FastAPI's own 422 or 400 follows
            return await handler(request)

        return strict


def _declares_json(content_type: str | None) -> bool:
    """The body is read as JSON by FastAPI (``application/json`` or ``application/*+json``).

    >>> _declares_json("application/json; charset=utf-8"), _declares_json("text/plain")
    (True, False)
    """
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _loaded(service: Service) -> Loaded:
    loaded = service.live.current()
    if loaded is None:
        reason = service.live.error or f"no model is active in {service.home.registry.root}"
        raise HTTPException(503, f"{reason}: promote a version (autofe nightly) first")
    return loaded


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorOut} for code in codes}


router = APIRouter(route_class=_StrictJSONRoute)


@router.post("/v1/predict", responses=_errors(400, 401, 413, 422, 503))
def predict(body: PredictRequest, service: ServiceDep) -> PredictionOut:
    """Predict one job not yet submitted: p50, 80 % / 90 % intervals, features used."""
    return service.predict(_loaded(service), body)


@router.post("/v1/predict/batch", responses=_errors(400, 401, 413, 422, 503))
def predict_batch(body: BatchRequest, service: ServiceDep) -> BatchOut:
    """Predict up to 100 jobs with one model version; results in order, errors per item."""
    loaded = _loaded(service)
    check_given_types(loaded, [(("items", i), item) for i, item in enumerate(body.items)])
    return BatchOut(
        model_version=loaded.version,
        results=[service.predict_item(loaded, item) for item in body.items],
    )


@router.post("/v1/recommend", responses=_errors(400, 401, 413, 422, 503))
def recommend(body: RecommendRequest, service: ServiceDep) -> RecommendOut:
    """The cheapest candidate configuration whose interval bound meets the deadline."""
    return service.recommend(_loaded(service), body)


@router.post("/v1/actuals", status_code=201, responses=_errors(400, 401, 413, 422, 503))
def actuals(body: ActualReport, service: ServiceDep) -> ActualOut:
    """Record a finished run's real duration (HOME/actuals.jsonl) and score its prediction."""
    return service.report_actual(body)


@router.get("/v1/models", responses=_errors(401))
def models(service: ServiceDep) -> ModelsOut:
    """Registered versions with their metrics, the active one, and the promotion history."""
    return service.models()


JobHandle = Annotated[str, FastApiPath(min_length=1, max_length=128)]


@router.post("/v1/jobs", status_code=201, responses=_errors(400, 401, 413, 422))
def submit_job(body: JobsDocument, service: ServiceDep) -> JobOut:
    """Submit one job request: the scheduler plans it and returns its handle."""
    return service.jobs.submit(body)


@router.get("/v1/jobs/{handle}", responses=_errors(401, 404, 422))
def job_status(handle: JobHandle, service: ServiceDep) -> JobOut:
    """A job's state, chosen plan, spend so far and predicted completion."""
    return service.jobs.get(handle)


@router.delete("/v1/jobs/{handle}", responses=_errors(401, 404, 409, 422))
def cancel_job(handle: JobHandle, service: ServiceDep) -> JobOut:
    """Cancel a waiting or running job; again: no change; a finished job: 409."""
    return service.jobs.cancel(handle)


@router.post("/v1/jobs/{handle}/events", responses=_errors(400, 401, 404, 409, 413, 422))
def report_job_event(handle: JobHandle, body: JobEventReport, service: ServiceDep) -> JobOut:
    """What happened to the job (started, progress, preempted, fallback, upgraded, done)."""
    return service.jobs.report(handle, body)


@router.get("/healthz", responses={503: {"model": HealthOut}})
def healthz(service: ServiceDep) -> Response:
    """Ok and the version served; 503 until a model is loaded. Needs no token."""
    health = service.health()
    status = 503 if health.model_version is None else 200
    return JSONResponse(health.model_dump(), status_code=status)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {}}}, **_errors(401)},
)
async def metrics(service: ServiceDep) -> PlainTextResponse:
    """Prometheus text exposition (requests, latency, model version, prediction error,
    scheduler spend, budgets, queue and runtime events)."""
    text = service.metrics.render(service.live.version)
    summary = await run_in_threadpool(service.jobs.summary)  # SQLite: off the event loop
    text += "\n".join(scheduler_lines(summary)) + "\n"
    return PlainTextResponse(text, media_type=CONTENT_TYPE)


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
    body = ErrorOut(error=_reason(exc.status_code), detail=str(exc.detail))
    return JSONResponse(body.model_dump(exclude_none=True), exc.status_code, exc.headers)


def _reason(status: int) -> str:
    return HTTPStatus(status).phrase


class _Guard:
    """Bearer token, body size limit and request metrics for every HTTP request."""

    def __init__(
        self,
        app: ASGIApp,
        service: Service,
        token: str | None,
        max_body: int,
        paths: frozenset[str],
    ) -> None:
        self.app = app
        self.metrics = service.metrics
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.paths = paths
        self.templates = [
            (re.compile("^" + re.sub(r"\\\{[^/]*?\\\}", "[^/]+", re.escape(p)) + "$"), p)
            for p in sorted(paths)
            if "{" in p
        ]
        """Routes with a path parameter count under their template, not each handle."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the outer error middleware answers if nothing below does

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, watched)
        finally:
            path = self._endpoint(scope["path"])
            seconds = time.perf_counter() - started
            self.metrics.observe_request(path, scope["method"], status, seconds)

    def _endpoint(self, path: str) -> str:
        if path in self.paths:
            return path
        return next((p for pattern, p in self.templates if pattern.match(path)), "other")

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token and scope["path"] not in OPEN_PATHS and not _authorized(scope, self.token):
            detail = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"
            await _refuse(401, detail, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        body = await _read_body(scope, receive, self.max_body)
        if body is None:
            detail = f"request body over {self.max_body} bytes"
            await _refuse(413, detail)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _authorized(scope: Scope, token: bytes) -> bool:
    """A constant-time comparison, so the response time does not leak the token's prefix."""
    given = dict(scope["headers"]).get(b"authorization", b"")
    scheme, _, credentials = given.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), token)


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None past ``limit`` (a declared length is refused before reading)."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _refuse(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = ErrorOut(error=_reason(status), detail=detail)
    return JSONResponse(body.model_dump(exclude_none=True), status, headers)


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
        token: Bearer token every endpoint but ``/healthz`` requires; ``None`` reads
            ``AUTOFE_API_TOKEN`` (unset or empty: no token).
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
    app.include_router(router)
    app.add_exception_handler(AutofeError, _autofe_error)
    app.add_exception_handler(ValidationError, _autofe_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(HTTPException, _http_error)
    routes = [*app.routes, *router.routes]  # an included router is one opaque entry
    paths = frozenset(path for route in routes if (path := getattr(route, "path", None)))
    app.add_middleware(_Guard, service=service, token=token, max_body=max_body_bytes, paths=paths)
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
    live: LiveModel = _service_of(app).live
    if live.version is None:
        raise ModelError(live.error or "the active model did not load")
    if not Home(home).warehouse.is_file():
        log.warning(
            "%s is missing: only predictions with features given will work", Home(home).warehouse
        )
    uvicorn.run(app, host=host, port=port, log_level="info")


def _service_of(app: FastAPI) -> Service:
    service: Service = app.state.service
    return service
