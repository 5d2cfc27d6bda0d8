"""What the prediction API does, without HTTP: the live model and the one :class:`Service`.

:class:`LiveModel` keeps the registry's active model loaded and swaps in a newly promoted one
without a pause; :class:`Service` answers predictions (features given or computed against
``HOME/warehouse.duckdb``), recommendations, actuals and model listings; :class:`JobHandles`
the scheduler's job handles. Every route of :mod:`autofe.pipelines.serve_routes` is one call
of one method here, so all of it runs (and is benchmarked) without a web server.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import duckdb
from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from autofe.errors import AutofeError, ConfigError, ModelError, WarehouseError, first_line
from autofe.json_file import append_json_line
from autofe.modeling.artifact import Artifact
from autofe.modeling.conformal import LEVELS
from autofe.modeling.predict import predict_pending, predict_values
from autofe.modeling.registry import Registry
from autofe.pipelines import triggers
from autofe.pipelines.home import Home
from autofe.pipelines.serve_errors import error_body
from autofe.pipelines.serve_metrics import (
    LEDGER_SIZE,
    ApiMetrics,
    PredictionLedger,
    Remembered,
    Scored,
)
from autofe.pipelines.serve_models import (
    ActualOut,
    ActualReport,
    Alternative,
    BatchItemOut,
    Candidate,
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
from autofe.pipelines.served_log import Served, ServedLog
from autofe.pipelines.triggers_actuals import ActualsCursor
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.store import (
    JobStore,
    Snapshot,
    Summary,
    UnknownHandle,
    submit_document,
)
from autofe.warehouse.connect import schema_fingerprint

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0

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
        self.served = ServedLog(self.home.served)
        self._actuals_lock = threading.Lock()
        self._checking = threading.Lock()
        self._actuals = ActualsCursor(self.home.actuals)
        self._served_error: str | None = None

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
        self._log_served(out, request.run_id)
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
            **interval_fields(remembered),
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
        self.check_triggers()
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

    def check_triggers(self) -> None:
        """Evaluate the retraining triggers after an actual (:func:`triggers.after_actuals`).

        The actual is recorded by then, so nothing here may fail the request: an error is
        logged. One check at a time: while one runs, another request skips its own (the next
        actual checks again, on a file that has only grown).
        """
        if not self._checking.acquire(blocking=False):
            return
        try:
            triggers.after_actuals(self.home.root, cursor=self._actuals)
        except (AutofeError, OSError) as exc:
            log.warning("retraining triggers not checked: %s", first_line(exc))
        # The actual is appended and scored already: a bug in the check must not make the
        # report a 500 that the client would retry, appending the actual twice.
        except Exception:
            log.exception("retraining triggers not checked")
        finally:
            self._checking.release()

    def trigger_records(self) -> list[dict[str, Any]]:
        """``HOME/triggers.jsonl``'s records for the metrics (none before the first firing)."""
        try:
            return triggers.read_triggers(self.home.triggers)
        except (AutofeError, OSError) as exc:
            log.warning("cannot read %s: %s", self.home.triggers, first_line(exc))
            return []

    def _log_served(self, out: PredictionOut, run_id: str | None) -> None:
        """Append the prediction's feature values to ``HOME/served.jsonl`` (skew telemetry:
        a failure is a warning, never a failed prediction)."""
        served = Served(time.time(), out.model_version, run_id, out.job_id, out.features)
        try:
            self.served.append(served)
        except OSError as exc:
            # Once per failure, not once per prediction: a full disk must not flood the log.
            if self._served_error is None:
                log.warning("cannot append to %s: %s", self.served.path, exc)
            self._served_error = str(exc)
            return
        if self._served_error is not None:
            log.info("appending to %s again", self.served.path)
            self._served_error = None

    def _append(self, record: dict[str, Any]) -> None:
        with self._actuals_lock:
            append_json_line(self.home.actuals, record)

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

    def snapshot(self, limit: int, events: int, now: float | None = None) -> Snapshot | None:
        """What the dashboard shows of the store (None before the first submit: a page
        creates nothing).

        Raises:
            ConfigError: the store cannot be read.
        """
        return self._open().snapshot(now, limit, events) if self.path.is_file() else None

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
    prediction = predict_values(loaded.artifact, values, run_id, request.job_id, request.novel)
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


def interval_fields(remembered: Remembered | None) -> dict[str, float | None]:
    """The remembered prediction's interval bounds as flat fields of an actuals record
    (``predicted_low_80``, ``predicted_high_80``, ...; None when nothing was remembered), so
    the dashboard can draw each actual against its interval and measure the coverage.

    >>> interval_fields(Remembered("j", 10.0, {"80%": (8.0, 12.5)}, "v0001"))
    {'predicted_low_80': 8.0, 'predicted_high_80': 12.5, 'predicted_low_90': None, \
'predicted_high_90': None}
    """
    out: dict[str, float | None] = {}
    for level in LEVELS:
        label = round(level * 100)
        bounds = remembered.intervals.get(f"{label}%") if remembered else None
        out[f"predicted_low_{label}"] = float(bounds[0]) if bounds else None
        out[f"predicted_high_{label}"] = float(bounds[1]) if bounds else None
    return out


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
