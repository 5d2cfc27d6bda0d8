"""The prediction API's request and response bodies, and how a configuration is chosen.

Kept apart from :mod:`autofe.pipelines.serve` (the only module that knows HTTP) so the shapes
and the choice rule are plain pydantic and plain Python, testable without a server. Every
request model forbids unknown fields and non-finite numbers, so a typo or a ``NaN`` is a 422
naming the field instead of a silently missing feature or a broken response.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from autofe.modeling.conformal import LEVELS
from autofe.modeling.pending import PendingRun
from autofe.modeling.predict import Prediction
from autofe.scheduler.store import JobRecord

Identifier = Annotated[str, Field(min_length=1, max_length=256)]
FeatureValue = float | bool | str | None
"""A feature value as JSON gives it: a number, a boolean, a category label, or missing."""
Price = Annotated[float, Field(gt=0, le=1e6, description="USD per hour for the whole cluster.")]
MAX_CANDIDATES = 20
"""Each candidate is a computed-features prediction (~0.35 s), so a recommendation is bounded."""
MAX_BATCH = 100
NUMBER_TYPES = frozenset({"DOUBLE", "BIGINT", "INTEGER"})
"""Feature value types a JSON number is given for; BOOLEAN takes true/false, VARCHAR text."""


class _Strict(BaseModel):
    """No coercion (``true`` is not 1.0, ``"5"`` is not 5): what the schema says, or a 422."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


def _rfc3339(value: object) -> datetime:
    """A timestamp as RFC 3339 text: a bare number or a date alone is refused, not guessed.

    >>> _rfc3339("2024-04-01T09:00:00Z").isoformat()
    '2024-04-01T09:00:00+00:00'
    """
    if not isinstance(value, str) or not _DATE_TIME.match(value):
        raise ValueError("give an RFC 3339 date-time, e.g. 2024-04-01T09:00:00Z")
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not a valid date-time ({exc})") from None


_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")
Timestamp = Annotated[
    datetime,
    BeforeValidator(_rfc3339),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": _DATE_TIME.pattern,
            "description": "RFC 3339; without an offset it is read as UTC.",
        }
    ),
]
"""Parsed by hand: strict mode would want a ``datetime`` object, which JSON cannot carry."""


class ClusterSpec(_Strict):
    """A cluster configuration the warehouse has not seen (the ``cluster_configs`` columns)."""

    node_type: str | None = Field(default=None, max_length=256)
    driver_node_type: str | None = Field(default=None, max_length=256)
    vcpu_per_node: float | None = Field(default=None, gt=0, le=10_000)
    memory_gb_per_node: float | None = Field(default=None, gt=0, le=1e6)
    num_workers: int | None = Field(default=None, ge=0, le=100_000)
    autoscale_min: int | None = Field(default=None, ge=0, le=100_000)
    autoscale_max: int | None = Field(default=None, ge=0, le=100_000)
    spot_policy: str | None = Field(default=None, max_length=64)
    spark_version: str | None = Field(default=None, max_length=256)
    spark_conf: dict[str, str | float | bool | None] | None = None
    hourly_price: Price | None = None


class JobDescription(_Strict):
    """A job the warehouse has never seen (the ``jobs`` columns)."""

    name: str | None = Field(default=None, max_length=1024)
    task_type: str | None = Field(default=None, max_length=64)
    script_path: str | None = Field(default=None, max_length=4096)
    script_text: str | None = None
    definition: dict[str, Any] | None = None


class _Job(_Strict):
    """What every request says about the job to be run."""

    job_id: Identifier
    run_id: Identifier | None = Field(
        default=None,
        description="Your id for the run; report the actual duration under the same id "
        "(POST /v1/actuals) to have this prediction's error measured.",
    )
    parameters: dict[str, Any] | None = None
    attributes: dict[str, float | str] | None = Field(
        default=None, description="Known-at-submit run attributes, e.g. tag.lab_scale_factor."
    )
    script_text: str | None = None
    job: JobDescription | None = None

    @field_validator("submit_time", check_fields=False)
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """The warehouse keeps naive UTC; a zone that overflows the year range is the user's."""
        if value is None or value.tzinfo is None:
            return value
        try:
            return value.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            raise ValueError("out of range once converted to UTC") from None

    def pending(
        self, submit_time: datetime, config_id: str | None, cluster: ClusterSpec | None
    ) -> PendingRun:
        """The pending run this request describes, on the configuration given."""
        return PendingRun(
            job_id=self.job_id,
            submit_time=submit_time,
            run_id=self.run_id or "pending",
            cluster_config_id=config_id,
            cluster=None if cluster is None else cluster.model_dump(exclude_none=True),
            parameters=self.parameters or {},
            attributes=self.attributes or {},
            script_text=self.script_text,
            job=None if self.job is None else self.job.model_dump(exclude_none=True),
        )


_SPEC_FIELDS = ("submit_time", "cluster_config_id", "cluster", "parameters", "attributes")


class PredictRequest(_Job):
    """One job to predict: feature values by name (fast), or a job spec to compute them from."""

    features: dict[str, FeatureValue] | None = Field(
        default=None,
        description="Feature values by name; names the model does not use are reported.",
    )
    submit_time: Timestamp | None = None
    cluster_config_id: Identifier | None = None
    cluster: ClusterSpec | None = None
    novel: bool | None = Field(
        default=None,
        description="With 'features': whether the run is on a configuration, node type or "
        "script version its job has not finished a run on (a computed prediction says so in "
        "its own 'novel'). It picks the runs the interval is calibrated on; omitted, every run.",
    )

    @model_validator(mode="after")
    def _one_way(self) -> PredictRequest:
        if self.features is None and self.submit_time is None:
            raise ValueError("give 'features' (values by name) or a job spec with 'submit_time'")
        spec = [name for name in (*_SPEC_FIELDS, "script_text", "job") if getattr(self, name)]
        if self.features is not None and spec:
            raise ValueError(f"give 'features' or a job spec, not both (also given: {spec})")
        if self.features is None and self.novel is not None:
            raise ValueError("'novel' goes with 'features'; a job spec's novelty is computed")
        return self

    def pending_run(self) -> PendingRun:
        assert self.submit_time is not None  # _one_way
        return self.pending(self.submit_time, self.cluster_config_id, self.cluster)


def feature_type_errors(
    value_types: Mapping[str, str], values: Mapping[str, FeatureValue]
) -> list[tuple[str, str]]:
    """``(name, why)`` for each value given for a model feature in another JSON type than it reads.

    The schema cannot say this (it depends on the model served), and the model would take
    ``true`` as 1.0 and a number for a category as its code: a prediction from a value the
    caller did not mean. Missing values (``null``) and names the model does not use pass.

    >>> types = {"cores": "DOUBLE", "weekend": "BOOLEAN", "node": "VARCHAR"}
    >>> feature_type_errors(types, {"cores": "5", "weekend": True, "node": 4.0, "x": "y"})
    [('cores', 'the model reads a number here (DOUBLE): give a JSON number, not text'), \
('node', 'the model reads text here (VARCHAR): give a string, not a number')]
    """
    errors = []
    for name, value in values.items():
        wanted = _JSON_TYPES.get(value_types.get(name, ""))
        if value is None or wanted is None:
            continue
        given = _json_type(value)
        if given != wanted:
            errors.append((name, _type_message(value_types[name], wanted, given)))
    return errors


_JSON_TYPES = {
    **dict.fromkeys(NUMBER_TYPES, "number"),
    "BOOLEAN": "boolean",
    "VARCHAR": "string",
}
"""The JSON type a given value must have, by the feature's value type (``ValueType``)."""
_NAMED = {"number": "a number", "boolean": "true/false", "string": "text"}
_GIVE = {"number": "a JSON number", "boolean": "true or false", "string": "a string"}


def _json_type(value: float | bool | str) -> str:
    if isinstance(value, bool):
        return "boolean"
    return "string" if isinstance(value, str) else "number"


def _type_message(value_type: str, wanted: str, given: str) -> str:
    return (
        f"the model reads {_NAMED[wanted]} here ({value_type}): "
        f"give {_GIVE[wanted]}, not {_NAMED[given]}"
    )


class BatchRequest(_Strict):
    items: list[PredictRequest] = Field(min_length=1, max_length=MAX_BATCH)


class Candidate(_Strict):
    """One configuration to price: an existing one by id, or a new one described."""

    cluster_config_id: Identifier | None = None
    cluster: ClusterSpec | None = None
    hourly_price: Price | None = Field(
        default=None, description="Overrides the cluster's hourly_price and the warehouse's."
    )

    @model_validator(mode="after")
    def _names_a_configuration(self) -> Candidate:
        if self.cluster_config_id is None and self.cluster is None:
            raise ValueError("give 'cluster_config_id' or 'cluster'")
        return self


class RecommendRequest(_Job):
    """A job, candidate configurations and a deadline: which is cheapest in time?"""

    submit_time: Timestamp
    candidates: list[Candidate] = Field(min_length=1, max_length=MAX_CANDIDATES)
    deadline_s: float = Field(gt=0, le=1e7)
    level: float = Field(
        default=0.9,
        description="Which interval's upper bound must meet the deadline: 0.8 or 0.9.",
        json_schema_extra={"enum": list(LEVELS)},
    )

    @field_validator("level")
    @classmethod
    def _calibrated(cls, value: float) -> float:
        if value not in LEVELS:
            raise ValueError(f"the model has intervals at {list(LEVELS)} only")
        return value


class ActualReport(_Strict):
    """A finished run's real duration (appended to ``HOME/actuals.jsonl``)."""

    run_id: Identifier
    job_id: Identifier
    duration_s: float = Field(ge=0.001, le=1e8, description="Seconds, at least 1 ms.")
    finished_at: Timestamp | None = None


# ------------------------------------------------------------------------------- responses


class PredictionOut(BaseModel):
    run_id: str
    job_id: str
    model_version: str
    feature_source: Literal["given", "computed"]
    p50_s: float
    intervals: dict[str, Annotated[list[float], Field(min_length=2, max_length=2)]] = Field(
        description='Conformal intervals in seconds by level: {"80%": [low, high], "90%": ...}'
    )
    features: dict[str, FeatureValue]
    missing_features: list[str]
    unknown_features: list[str] = Field(description="Given, but not used by this model.")
    novel: bool | None = Field(
        default=None,
        description="Whether the run is new to its job's history (a configuration, node type "
        "or script version it has not finished on): its interval is calibrated on such runs. "
        "null when unknown (features given without 'novel').",
    )

    @classmethod
    def of(
        cls,
        prediction: Prediction,
        version: str,
        source: Literal["given", "computed"],
        unknown: Sequence[str] = (),
    ) -> PredictionOut:
        data = prediction.as_dict()
        return cls.model_validate(
            {
                **data,
                "model_version": version,
                "feature_source": source,
                "unknown_features": unknown,
            }
        )


class ErrorOut(BaseModel):
    """Every error body: the kind, one line saying what is wrong, and field errors for a 422."""

    error: str
    detail: str
    errors: list[dict[str, str]] | None = None


class BatchItemOut(BaseModel):
    status: int = Field(description="200, or the status this item alone would have got.")
    prediction: PredictionOut | None = None
    error: ErrorOut | None = None


class BatchOut(BaseModel):
    model_version: str
    results: list[BatchItemOut]


class Alternative(BaseModel):
    """One candidate priced: its predicted p50, the interval bound, and the expected cost."""

    index: int
    cluster_config_id: str | None
    p50_s: float
    bound_s: float
    hourly_price: float
    price_source: Literal["request", "cluster", "warehouse"]
    expected_cost_usd: float
    meets_deadline: bool


class RecommendOut(BaseModel):
    model_version: str
    deadline_s: float
    level: float
    meets_deadline: bool
    choice: Alternative
    alternatives: list[Alternative]


class ActualOut(BaseModel):
    run_id: str
    recorded: bool
    matched: bool = Field(description="This server predicted the run (same run_id).")
    predicted_p50_s: float | None = None
    abs_pct_error: float | None = None
    model_version: str | None = None


class VersionOut(BaseModel):
    version: str
    created: str
    metrics: dict[str, Any]
    active: bool


class ModelsOut(BaseModel):
    active: str | None
    serving: str | None
    versions: list[VersionOut]
    history: list[dict[str, Any]]


class HealthOut(BaseModel):
    status: Literal["ok", "stale", "no model"]
    model_version: str | None
    active_version: str | None
    loaded_at: str | None
    reload_error: str | None


def alternative(
    index: int,
    config_id: str | None,
    p50_s: float,
    bound_s: float,
    price: tuple[float, Literal["request", "cluster", "warehouse"]],
    deadline_s: float,
) -> Alternative:
    """Price one candidate: expected cost is the p50 run time at the hourly price.

    >>> a = alternative(0, "c1", 1800.0, 2400.0, (2.0, "request"), 3000.0)
    >>> a.expected_cost_usd, a.meets_deadline
    (1.0, True)
    """
    return Alternative(
        index=index,
        cluster_config_id=config_id,
        p50_s=round(p50_s, 3),
        bound_s=round(bound_s, 3),
        hourly_price=price[0],
        price_source=price[1],
        expected_cost_usd=round(p50_s * price[0] / 3600.0, 6),
        meets_deadline=bound_s <= deadline_s,
    )


def choose_configuration(alternatives: Sequence[Alternative]) -> Alternative:
    """The cheapest alternative that meets the deadline; when none does, the fastest by bound.

    Ties go to the tighter bound, then to the earlier candidate, so the answer is stable.

    >>> def alt(i, bound, price, deadline=100.0):
    ...     return alternative(i, None, bound / 2, bound, (price, "request"), deadline)
    >>> choose_configuration([alt(0, 90, 4.0), alt(1, 60, 8.0), alt(2, 150, 1.0)]).index
    0
    >>> choose_configuration([alt(0, 190, 4.0), alt(1, 160, 8.0)]).index
    1
    """
    meeting = [a for a in alternatives if a.meets_deadline]
    if meeting:
        return min(meeting, key=lambda a: (a.expected_cost_usd, a.bound_s, a.index))
    return min(alternatives, key=lambda a: (a.bound_s, a.expected_cost_usd, a.index))


# ------------------------------------------------------------------- scheduler job handles

JOB_EXAMPLE: dict[str, Any] = {
    "job_id": "etl-1",
    "tier": "P1",
    "account": "team-a",
    "deadline": "2030-04-01T06:00:00Z",
    "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
    "checkpoint": {"interval_s": 600, "write_s": 10, "restore_s": 30},
    "task": {"type": "spark_python", "python_file": "dbfs:/jobs/etl.py"},
}


class JobsDocument(_Strict):
    """One job request as a jobs file holds it (``docs/scheduler.md``).

    The job object is validated by the scheduler's job-file reader, not by this schema, so
    every error names the job (``job 'etl-1': unknown instance type ...``) as the CLI's do.
    """

    format: Literal["autofe-jobs/1"] = "autofe-jobs/1"
    source: str = Field(default="", max_length=1024)
    budgets: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=100,
        description='{"name": account or tier, "usd", "period_s"}; replaces a stored budget.',
    )
    jobs: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=1,
        description="Exactly one job (``autofe schedule submit`` takes a file of many).",
        json_schema_extra={"examples": [[JOB_EXAMPLE]]},
    )


class PlanOut(BaseModel):
    """The plan chosen at submit: where and how the job runs, and what that should cost."""

    job_id: str
    shape: str = Field(description='"TYPE xN": N nodes of the instance type.')
    cloud: str
    region: str
    market: Literal["on-demand", "spot"]
    fallback_after: int | None = Field(description="Spot preemptions before on-demand.")
    expected_cost_usd: float
    p_deadline: float = Field(description="P(finish before the deadline), 1 without one.")
    p50_s: float
    high_s: float
    expected_preemptions: float
    hourly_usd: float = Field(description="The whole cluster's price per hour.")


class JobEventOut(BaseModel):
    at: float
    kind: str
    progress: float | None = None
    hourly_usd: float | None = None
    reason: str | None = None


class JobOut(BaseModel):
    """A submitted job: its state, chosen plan, spend so far and predicted completion.

    Times are Unix seconds. ``spend_usd`` counts the running price up to ``as_of``;
    ``predicted_completion`` is the finish time once finished.
    """

    handle: str
    job_id: str
    account: str
    tier: str
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    plan: PlanOut
    request: dict[str, Any]
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    hourly_usd: float
    spend_usd: float
    progress: float | None
    predicted_completion: float | None
    preemptions: int
    fallbacks: int
    upgrades: int
    events: list[JobEventOut]
    as_of: float

    @classmethod
    def of(cls, record: JobRecord) -> JobOut:
        return cls.model_validate(record.as_dict())


class JobEventReport(_Strict):
    """What happened to a submitted job, reported by whatever runs it."""

    kind: Literal["started", "progress", "preempted", "fallback", "upgraded", "succeeded", "failed"]
    progress: float | None = Field(
        default=None, gt=0, le=1, description="Fraction done (progress events)."
    )
    hourly_usd: float | None = Field(
        default=None, ge=0, le=1e6, description="The new cluster price (fallback, upgraded)."
    )
    reason: str | None = Field(default=None, max_length=1024)
