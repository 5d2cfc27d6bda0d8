"""A run table's TOML mapping: its format, its validation, and which columns become attributes.

A mapping file names the table(s), the label column and its unit, how run and job ids are made,
which columns describe the cluster, and whether each remaining column is known at submit or
only after the run (``docs/mappings.md``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from autofe.errors import ConfigError
from autofe.ingest.run_table.cells import finite_number
from autofe.schema import Availability
from autofe.special_file import special_file

LabelUnit = Literal["s", "ms", "min", "h"]
EpochUnit = Literal["s", "ms", "us"]
Status = Literal["SUCCEEDED", "FAILED", "TIMEOUT", "CANCELED", "INCOMPLETE"]
Plan = tuple[tuple[str, Availability], ...]
SYNTHETIC_EPOCH = datetime(2000, 1, 1)
ALL = "*"
FILE_PLACEHOLDER = "_file"
TEXT_FIELDS = frozenset({"node_type", "driver_node_type", "spot_policy", "spark_version"})
INTEGER_FIELDS = frozenset({"num_workers", "autoscale_min", "autoscale_max"})
IDENTITY_KEYS = ("run_id", "job_id", "cluster")
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def _exactly_one(section: BaseModel, *keys: str) -> None:
    """Raise unless exactly one of ``keys`` is set (e.g. "give exactly one of `a` or `b`")."""
    if sum(getattr(section, key) is not None for key in keys) != 1:
        quoted = [f"`{key}`" for key in keys]
        raise ValueError(f"give exactly one of {', '.join(quoted[:-1])} or {quoted[-1]}")


class _Section(BaseModel):
    # Unknown keys are errors: a misspelt `untis` must not silently fall back to a default.
    model_config = ConfigDict(extra="forbid", frozen=True)


class CsvOptions(_Section):
    """How to read a CSV table; DuckDB sniffs the delimiter when it is not given."""

    delimiter: str | None = None
    header: bool = True
    skip_rows: int = Field(default=0, ge=0)


class RunIdSpec(_Section):
    """A run id from a column or a template; neither means the row number."""

    column: str | None = None
    template: str | None = None

    @model_validator(mode="after")
    def _at_most_one(self) -> Self:
        if self.column is not None and self.template is not None:
            raise ValueError("give `column` or `template`, not both")
        return self


class JobIdSpec(_Section):
    """A job id from a column, a template over columns, or a constant."""

    column: str | None = None
    template: str | None = None
    constant: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        _exactly_one(self, "column", "template", "constant")
        return self


class SubmitTimeSpec(_Section):
    """Submit time from a column, or synthetic (start + row index x step) when absent."""

    column: str | None = None
    format: str | None = None
    unit: EpochUnit = "s"
    synthetic_start: datetime = SYNTHETIC_EPOCH
    synthetic_step_s: float = Field(default=86_400.0, gt=0)

    @model_validator(mode="after")
    def _format_needs_column(self) -> Self:
        if self.column is None and self.format is not None:
            raise ValueError("`format` needs `column`")
        return self


class LabelSpec(_Section):
    """The measured runtime column and its unit; stored as runs.duration_s in seconds."""

    column: str
    unit: LabelUnit


class StatusRule(_Section):
    """One status test on one column; the first matching rule wins."""

    column: str
    status: Status
    equals: bool | int | float | str | None = None
    below: float | None = None
    at_least: float | None = None

    @model_validator(mode="after")
    def _one_test(self) -> Self:
        _exactly_one(self, "equals", "below", "at_least")
        return self


class StatusSpec(_Section):
    """How runs get their status; rows whose status is in ``skip`` become ingest issues."""

    default: Status = "SUCCEEDED"
    rules: tuple[StatusRule, ...] = ()
    skip: tuple[Status, ...] = ()


class FieldSpec(_Section):
    """One cluster_configs field: a column (optionally scaled) or a constant ``value``."""

    column: str | None = None
    value: int | float | str | None = None
    scale: float = 1.0
    times: str | None = None
    divided_by: str | None = None

    @model_validator(mode="after")
    def _column_or_value(self) -> Self:
        _exactly_one(self, "column", "value")
        if self.value is not None and (self.times or self.divided_by or self.scale != 1.0):
            raise ValueError("`scale`, `times` and `divided_by` apply to a `column` only")
        return self

    def columns(self) -> tuple[str, ...]:
        return tuple(c for c in (self.column, self.times, self.divided_by) if c is not None)


class ClusterSpec(_Section):
    """Columns (or constants) that become the run's cluster_configs row."""

    node_type: FieldSpec | None = None
    driver_node_type: FieldSpec | None = None
    vcpu_per_node: FieldSpec | None = None
    memory_gb_per_node: FieldSpec | None = None
    num_workers: FieldSpec | None = None
    autoscale_min: FieldSpec | None = None
    autoscale_max: FieldSpec | None = None
    spot_policy: FieldSpec | None = None
    spark_version: FieldSpec | None = None
    hourly_price: FieldSpec | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _bare_column(cls, value: object) -> object:
        return {"column": value} if isinstance(value, str) else value

    def fields(self) -> dict[str, FieldSpec]:
        """The mapped fields by name."""
        specs = {name: getattr(self, name) for name in type(self).model_fields}
        return {name: spec for name, spec in specs.items() if spec is not None}


class AttributeSpec(_Section):
    """Which remaining columns become run_attributes, and with which availability."""

    known_at_submit: tuple[str, ...] = ()
    post_execution: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


class RunTableSpec(_Section):
    """The content of one mapping file (see docs/mappings.md for every key)."""

    source: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    files: tuple[str, ...] = Field(min_length=1)
    format: Literal["csv", "parquet"] | None = None
    csv: CsvOptions = CsvOptions()
    run_id: RunIdSpec = RunIdSpec()
    job_id: JobIdSpec
    submit_time: SubmitTimeSpec = SubmitTimeSpec()
    label: LabelSpec
    status: StatusSpec = StatusSpec()
    cluster: ClusterSpec = ClusterSpec()
    attributes: AttributeSpec = AttributeSpec()

    @field_validator("files", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value


@dataclass(frozen=True)
class RunTableMapping:
    """A validated mapping file; ``files`` patterns are relative to ``path``'s folder."""

    path: Path
    spec: RunTableSpec


def load_mapping(path: Path) -> RunTableMapping:
    """Read and validate a mapping file.

    Raises:
        ConfigError: the file is unreadable or not TOML, a key is unknown, missing or of the
            wrong type, or the mapping would let the label or a post-execution column identify
            a job or a cluster. The message starts with the file and names the key.
    """
    data = _read_toml(path)
    try:
        spec = RunTableSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(exc)}") from exc
    _check_attribute_lists(spec, path)
    _check_identity_columns(spec, path)
    _check_cluster_values(spec, path)
    return RunTableMapping(path=path, spec=spec)


def _read_toml(path: Path) -> dict[str, Any]:
    refused = special_file(path)
    if refused:
        raise ConfigError(f"{path}: {refused}")
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read mapping: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


def _describe(exc: ValidationError) -> str:
    """One clause per problem, each led by its dotted key (``label.unit: Input should be…``)."""
    clauses = []
    for err in exc.errors(include_url=False):
        key = ".".join(str(part) for part in err["loc"]) or "mapping"
        clauses.append(f"{key}: {err['msg']}")
    return "; ".join(clauses)


def attribute_lists(spec: RunTableSpec) -> dict[str, tuple[str, ...]]:
    a = spec.attributes
    return {
        "known_at_submit": a.known_at_submit,
        "post_execution": a.post_execution,
        "ignore": a.ignore,
    }


def _check_attribute_lists(spec: RunTableSpec, path: Path) -> None:
    """Each column in at most one list; the label in none but ``ignore``."""
    seen: dict[str, str] = {}
    for key, names in attribute_lists(spec).items():
        for name in names:
            if name in seen:
                raise ConfigError(
                    f"{path}: attributes.{key}: {name!r} is also in attributes.{seen[name]}"
                )
            seen[name] = key
    where = seen.get(spec.label.column, "ignore")
    if where != "ignore":
        raise ConfigError(
            f"{path}: attributes.{where}: {spec.label.column!r} is the label "
            "(stored as runs.duration_s); do not list it as an attribute"
        )


def _check_identity_columns(spec: RunTableSpec, path: Path) -> None:
    """Ids and cluster fields are known at submit, so they must not read measured columns."""
    measured = {spec.label.column, *spec.attributes.post_execution}
    for key, column in references(spec):
        if key.startswith(IDENTITY_KEYS) and column in measured:
            raise ConfigError(
                f"{path}: {key}: column {column!r} is measured after the run "
                "(label or attributes.post_execution); it cannot be known at submit"
            )


def _check_cluster_values(spec: RunTableSpec, path: Path) -> None:
    for name, fs in spec.cluster.fields().items():
        key = f"{path}: cluster.{name}"
        if name in TEXT_FIELDS and (fs.times or fs.divided_by or fs.scale != 1.0):
            raise ConfigError(f"{key}: a text field takes no `scale`, `times` or `divided_by`")
        if name not in TEXT_FIELDS and fs.value is not None and finite_number(fs.value) is None:
            raise ConfigError(f"{key}: value {fs.value!r} is not a number")


def _template_columns(template: str | None) -> tuple[str, ...]:
    """Columns a template reads; ``{_file}`` is the table file's name, not a column.

    >>> _template_columns("{workload}-{_file}-{datasize}")
    ('workload', 'datasize')
    """
    found = PLACEHOLDER.findall(template or "")
    return tuple(name for name in found if name != FILE_PLACEHOLDER)


def references(spec: RunTableSpec) -> Iterator[tuple[str, str]]:
    """Every (key, column) the mapping reads, apart from the attribute lists."""
    for key, template in (
        ("run_id.template", spec.run_id.template),
        ("job_id.template", spec.job_id.template),
    ):
        yield from ((key, column) for column in _template_columns(template))
    singles = {
        "run_id.column": spec.run_id.column,
        "job_id.column": spec.job_id.column,
        "submit_time.column": spec.submit_time.column,
        "label.column": spec.label.column,
    }
    yield from ((key, column) for key, column in singles.items() if column is not None)
    for i, rule in enumerate(spec.status.rules):
        yield f"status.rules[{i}].column", rule.column
    for name, fs in spec.cluster.fields().items():
        yield from ((f"cluster.{name}", column) for column in fs.columns())


def plan_attributes(mapping: RunTableMapping, path: Path, columns: Sequence[str]) -> Plan:
    """Which columns of this table become run_attributes, with their availability.

    Raises:
        ConfigError: a column the mapping names is not in the table, or a table column is in
            no attribute list and there is no ``"*"`` to sweep it up.
    """
    spec = mapping.spec
    _require_columns(mapping, path, columns)
    lists = attribute_lists(spec)
    mentioned = {name for names in lists.values() for name in names}
    mentioned |= {column for _, column in references(spec)}
    rest = [c for c in columns if c not in mentioned]
    sweep = next((key for key, names in lists.items() if ALL in names), None)
    if rest and sweep is None:
        raise ConfigError(
            f"{mapping.path}: attributes: columns {rest} of {path.name} are not assigned; list "
            'them under known_at_submit, post_execution or ignore, or add "*" to one list'
        )
    plan = [(c, Availability(key)) for key in lists if key != "ignore" for c in lists[key]]
    plan = [(c, a) for c, a in plan if c != ALL]
    if sweep is not None and sweep != "ignore":
        plan += [(c, Availability(sweep)) for c in rest]
    return tuple(plan)


def _require_columns(mapping: RunTableMapping, path: Path, columns: Sequence[str]) -> None:
    listed = [
        (f"attributes.{k}", c)
        for k, names in attribute_lists(mapping.spec).items()
        for c in names
        if c != ALL
    ]
    for key, column in [*references(mapping.spec), *listed]:
        if column not in columns:
            raise ConfigError(
                f"{mapping.path}: {key}: column {column!r} is not in {path.name} "
                f"(it has: {', '.join(columns)})"
            )
