"""The prediction API's routes: thin, each one call of one :class:`Service` method.

Bodies are read strictly (:mod:`autofe.pipelines.serve_json`: no ``NaN``, no lone surrogate)
and validated with the pydantic models of :mod:`autofe.pipelines.serve_models` before a route
runs. The routes are declared here in the order the OpenAPI document lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi import Path as FastApiPath
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from autofe.pipelines.serve_json import BodyRefused, read_json
from autofe.pipelines.serve_metrics import CONTENT_TYPE, scheduler_lines, trigger_lines
from autofe.pipelines.serve_models import (
    ActualOut,
    ActualReport,
    BatchOut,
    BatchRequest,
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
)
from autofe.pipelines.serve_service import Loaded, Service, check_given_types


async def _service_dependency(request: Request) -> Service:
    """Async, so FastAPI resolves it on the event loop instead of a worker thread."""
    return service_of(request.app)


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
    scheduler spend, budgets, queue and runtime events, retraining triggers)."""
    text = service.metrics.render(service.live.version)
    summary = await run_in_threadpool(service.jobs.summary)  # SQLite: off the event loop
    text += "\n".join(scheduler_lines(summary)) + "\n"
    firings = await run_in_threadpool(service.trigger_records)  # a file: off the loop too
    text += "\n".join(trigger_lines(firings)) + "\n"
    return PlainTextResponse(text, media_type=CONTENT_TYPE)


def service_of(app: FastAPI) -> Service:
    """The one :class:`Service` :func:`~autofe.pipelines.serve.create_app` attached to ``app``."""
    service: Service = app.state.service
    return service
