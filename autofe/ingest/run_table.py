"""Ingest generic run tables (CSV, CSV.gz, Parquet) into the warehouse, driven by a TOML mapping.

A mapping file names the table(s), the label column and its unit, how run and job ids are made,
which columns describe the cluster, and whether each remaining column is known at submit or
only after the run. Every column must be assigned (or swept up by ``"*"``): a column nobody
looked at is exactly how a measured value ends up tagged as known before the run. The format is
documented in ``docs/mappings.md``; shipped examples live in ``examples/mappings/``.
"""

from __future__ import annotations

import glob
import json
import logging
import math
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, Self

import duckdb
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from autofe.errors import ConfigError, IngestError, WarehouseError, first_line
from autofe.ingest.eventlog.fields import shown
from autofe.schema import Availability, IngestIssue, IngestReport
from autofe.special_file import special_file
from autofe.warehouse.ledger import (
    already_ingested,
    hash_bytes,
    hash_files,
    record_ingested,
    record_issues,
)
from autofe.warehouse.write import insert_rows, transaction

log = logging.getLogger(__name__)

LabelUnit = Literal["s", "ms", "min", "h"]
EpochUnit = Literal["s", "ms", "us"]
Status = Literal["SUCCEEDED", "FAILED", "TIMEOUT", "CANCELED", "INCOMPLETE"]
Plan = tuple[tuple[str, Availability], ...]
Row = dict[str, Any]

UNIT_SECONDS: dict[str, tuple[int, int]] = {
    "s": (1, 1),
    "ms": (1, 1000),
    "us": (1, 1_000_000),
    "min": (60, 1),
    "h": (3600, 1),
}
SYNTHETIC_EPOCH = datetime(2000, 1, 1)
UNIX_EPOCH = datetime(1970, 1, 1)
ALL = "*"
KNOWN = Availability.KNOWN_AT_SUBMIT
FILE_PLACEHOLDER = "_file"
TABLE_SUFFIXES = frozenset({".gz", ".zst", ".csv", ".tsv", ".txt", ".parquet", ".pq"})
TEXT_FIELDS = frozenset({"node_type", "driver_node_type", "spot_policy", "spark_version"})
INTEGER_FIELDS = frozenset({"num_workers", "autoscale_min", "autoscale_max"})
IDENTITY_KEYS = ("run_id", "job_id", "cluster")
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


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
    def _exactly_one(self) -> Self:
        if sum(v is not None for v in (self.column, self.template, self.constant)) != 1:
            raise ValueError("give exactly one of `column`, `template` or `constant`")
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
        if sum(v is not None for v in (self.equals, self.below, self.at_least)) != 1:
            raise ValueError("give exactly one of `equals`, `below` or `at_least`")
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
        if (self.column is None) == (self.value is None):
            raise ValueError("give exactly one of `column` or `value`")
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


def _attribute_lists(spec: RunTableSpec) -> dict[str, tuple[str, ...]]:
    a = spec.attributes
    return {
        "known_at_submit": a.known_at_submit,
        "post_execution": a.post_execution,
        "ignore": a.ignore,
    }


def _check_attribute_lists(spec: RunTableSpec, path: Path) -> None:
    """Each column in at most one list; the label in none but ``ignore``."""
    seen: dict[str, str] = {}
    for key, names in _attribute_lists(spec).items():
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
    for key, column in _references(spec):
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
        if name not in TEXT_FIELDS and fs.value is not None and _number(fs.value) is None:
            raise ConfigError(f"{key}: value {fs.value!r} is not a number")


def _template_columns(template: str | None) -> tuple[str, ...]:
    """Columns a template reads; ``{_file}`` is the table file's name, not a column.

    >>> _template_columns("{workload}-{_file}-{datasize}")
    ('workload', 'datasize')
    """
    found = _PLACEHOLDER.findall(template or "")
    return tuple(name for name in found if name != FILE_PLACEHOLDER)


def _references(spec: RunTableSpec) -> Iterator[tuple[str, str]]:
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


def resolve_tables(mapping: RunTableMapping, table_path: Path | None = None) -> list[Path]:
    """The table files to ingest: ``table_path`` if given, else every match of ``files``.

    Raises:
        ConfigError: ``table_path`` is not a file, or a ``files`` pattern matches nothing.
    """
    if table_path is not None:
        if not table_path.is_file():
            what = special_file(table_path) or "is not a file"
            raise ConfigError(f"{mapping.path}: table_path {table_path} {what}")
        return [table_path]
    base = mapping.path.parent
    found: list[Path] = []
    for pattern in mapping.spec.files:
        hits = sorted(Path(p).resolve() for p in glob.glob(str(base / pattern)))
        hits = [p for p in hits if p.is_file()]
        if not hits:
            raise ConfigError(f"{mapping.path}: files: no file matches {pattern!r} (from {base})")
        found.extend(hits)
    return list(dict.fromkeys(found))


def read_table(spec: RunTableSpec, path: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of one table file, in file order (DuckDB reads and types it).

    Raises:
        IngestError: DuckDB cannot read the file.
    """
    con = duckdb.connect()
    try:
        rel = _relation(con, spec, path)
        return list(rel.columns), rel.fetchall()
    except duckdb.Error as exc:
        raise IngestError(str(path), f"cannot read table: {first_line(exc)}") from exc
    finally:
        con.close()


def _is_parquet(spec: RunTableSpec, path: Path) -> bool:
    if spec.format is not None:
        return spec.format == "parquet"
    return path.suffix.lower() in (".parquet", ".pq")


def _relation(
    con: duckdb.DuckDBPyConnection, spec: RunTableSpec, path: Path
) -> duckdb.DuckDBPyRelation:
    if _is_parquet(spec, path):
        return con.read_parquet(str(path))
    rel = _read_csv(con, spec.csv, path, None)
    column = spec.submit_time.column
    if spec.submit_time.format and column in rel.columns:
        # DuckDB would sniff (and might misread, e.g. day/month) the times; the format decides.
        rel = _read_csv(con, spec.csv, path, {column: "VARCHAR"})
    return rel


def _read_csv(
    con: duckdb.DuckDBPyConnection, opts: CsvOptions, path: Path, dtype: dict[str, str] | None
) -> duckdb.DuckDBPyRelation:
    kwargs: dict[str, Any] = {"header": opts.header, "skiprows": opts.skip_rows}
    if opts.delimiter is not None:
        kwargs["delimiter"] = opts.delimiter
    if dtype:
        kwargs["dtype"] = dtype
    return con.read_csv(str(path), **kwargs)


def plan_attributes(mapping: RunTableMapping, path: Path, columns: Sequence[str]) -> Plan:
    """Which columns of this table become run_attributes, with their availability.

    Raises:
        ConfigError: a column the mapping names is not in the table, or a table column is in
            no attribute list and there is no ``"*"`` to sweep it up.
    """
    spec = mapping.spec
    _require_columns(mapping, path, columns)
    lists = _attribute_lists(spec)
    mentioned = {name for names in lists.values() for name in names}
    mentioned |= {column for _, column in _references(spec)}
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
        for k, names in _attribute_lists(mapping.spec).items()
        for c in names
        if c != ALL
    ]
    for key, column in [*_references(mapping.spec), *listed]:
        if column not in columns:
            raise ConfigError(
                f"{mapping.path}: {key}: column {column!r} is not in {path.name} "
                f"(it has: {', '.join(columns)})"
            )


@dataclass(frozen=True)
class _Row:
    """One table row with where it came from, so a problem can name its line."""

    path: str
    line: int
    index: int
    file: str
    values: Mapping[str, Any]

    def get(self, column: str) -> Any:
        return self.values[column]

    def fail(self, reason: str) -> IngestError:
        return IngestError(self.path, reason, self.line)


@dataclass(frozen=True)
class _TableContext:
    mapping: RunTableMapping
    path: Path
    plan: Plan
    first_line: int


@dataclass(frozen=True)
class _RunRows:
    run: Row
    job: Row
    config: Row | None
    attributes: list[Row]


@dataclass
class _Batch:
    """Everything one table file adds, written in one transaction."""

    runs: dict[str, Row] = field(default_factory=dict)
    jobs: dict[str, Row] = field(default_factory=dict)
    configs: dict[str, Row] = field(default_factory=dict)
    attributes: list[Row] = field(default_factory=list)
    issues: list[IngestIssue] = field(default_factory=list)


def ingest_run_table(
    con: duckdb.DuckDBPyConnection,
    mapping_path: Path,
    report: IngestReport,
    table_path: Path | None = None,
) -> None:
    """Ingest the run table(s) a mapping names into runs, jobs, cluster_configs, run_attributes.

    Each table file is hashed together with the mapping: a file ingested before with the same
    mapping is skipped (``report.files_unchanged``); a changed file or mapping upserts its runs.
    Each file is one transaction, so a failure keeps nothing of that file. Rows whose label is
    missing or not a number, or whose status is in ``status.skip``, are left out and reported in
    ``report.issues`` (and the ``ingest_issues`` table) with their line.

    Args:
        con: An open warehouse (``open_warehouse``), not inside a transaction.
        mapping_path: The TOML mapping file.
        report: Counters and issues are added to it; the caller sets ``seconds``.
        table_path: Ingest this file instead of the mapping's ``files``.

    Raises:
        ConfigError: the mapping is invalid, names a missing file or column, or leaves a column
            unassigned.

    A table file that cannot be read, whose every row is refused, or whose rows the warehouse
    refuses is a fatal issue in ``report.issues`` (its rows rolled back); the next file goes on.
    """
    mapping = load_mapping(mapping_path)
    for path in resolve_tables(mapping, table_path):
        try:
            _ingest_table(con, mapping, path, report)
        except (IngestError, WarehouseError) as exc:  # this table is skipped, not the batch
            _refuse(con, report, _as_issue(exc, path))


def _as_issue(exc: IngestError | WarehouseError, path: Path) -> IngestIssue:
    if isinstance(exc, IngestError):
        return IngestIssue(exc.path, exc.reason, exc.line, fatal=True)
    return IngestIssue(str(path), str(exc), fatal=True)


def _refuse(con: duckdb.DuckDBPyConnection, report: IngestReport, issue: IngestIssue) -> None:
    """A table not stored: in the report and the issues table, not in the ledger (so the
    fixed table is ingested by the next run)."""
    report.issues.append(issue)
    record_issues(con, [issue])


def _ingest_table(
    con: duckdb.DuckDBPyConnection, mapping: RunTableMapping, path: Path, report: IngestReport
) -> None:
    refused = special_file(path)
    if refused:
        raise IngestError(str(path), refused)
    digest = hash_files([mapping.path, path])
    if already_ingested(con, digest):
        report.files_unchanged += 1
        return
    columns, rows = read_table(mapping.spec, path)
    plan = plan_attributes(mapping, path, columns)
    ctx = _TableContext(mapping, path, plan, _first_data_line(mapping.spec, path))
    batch = _build_batch(ctx, columns, rows)
    if not batch.runs:
        record_issues(con, batch.issues)
        report.issues.extend(batch.issues)
        raise IngestError(str(path), _nothing_usable(len(rows), batch.issues))
    report.jobs += _write(con, batch, digest, path)
    report.runs += len(batch.runs)
    report.files_ingested += 1
    report.issues.extend(batch.issues)
    log.info("%s: %d runs, %d rows skipped", path, len(batch.runs), len(batch.issues))


def _nothing_usable(rows: int, issues: Sequence[IngestIssue]) -> str:
    """Why a table gave no run: it is empty, or every row was refused (the first reason shown).

    >>> _nothing_usable(0, [])
    'no run ingested: the table has no data rows'
    """
    if not rows:
        return "no run ingested: the table has no data rows"
    first = issues[0]
    return (
        f"no run ingested: all {rows} rows were refused (first, line {first.line}: {first.reason})"
    )


def _first_data_line(spec: RunTableSpec, path: Path) -> int:
    """1-based line of the first data row (Parquet: row numbers); assumes one record a line."""
    if _is_parquet(spec, path):
        return 1
    return spec.csv.skip_rows + (2 if spec.csv.header else 1)


def _file_stem(path: Path) -> str:
    """The table's name without table or compression suffixes: the ``{_file}`` placeholder.

    >>> _file_stem(Path("bell/grep.spark.csv")), _file_stem(Path("P8_kmeans.csv.gz"))
    ('grep.spark', 'P8_kmeans')
    """
    name = path.name
    while Path(name).suffix.lower() in TABLE_SUFFIXES:
        name = Path(name).stem
    return name


def _build_batch(
    ctx: _TableContext, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> _Batch:
    batch = _Batch()
    stem = _file_stem(ctx.path)
    for index, values in enumerate(rows):
        line = ctx.first_line + index
        row = _Row(str(ctx.path), line, index, stem, dict(zip(columns, values, strict=True)))
        try:
            _collect(batch, _run_rows(ctx, row), row)
        except IngestError as exc:
            batch.issues.append(IngestIssue(exc.path, exc.reason, exc.line))
        except Exception as exc:  # one row's surprise skips the row, not the table
            reason = f"row skipped: {type(exc).__name__}: {exc}"
            batch.issues.append(IngestIssue(row.path, reason, row.line))
    return batch


def _collect(batch: _Batch, rows: _RunRows, row: _Row) -> None:
    run_id = rows.run["run_id"]
    if run_id in batch.runs:
        raise row.fail(f"duplicate run id {run_id!r} (the run_id column repeats)")
    batch.runs[run_id] = rows.run
    batch.jobs.setdefault(rows.job["job_id"], rows.job)
    if rows.config is not None:
        batch.configs.setdefault(rows.config["config_id"], rows.config)
    batch.attributes.extend(rows.attributes)


def _run_rows(ctx: _TableContext, row: _Row) -> _RunRows:
    """All warehouse rows of one table row; raises IngestError if the row must be skipped."""
    spec = ctx.mapping.spec
    duration = _duration_s(spec.label, row)
    status = _status(spec.status, row)
    if status in spec.status.skip:
        raise row.fail(f"status {status} is listed in status.skip")
    run_id = f"{spec.source}:{_run_key(spec.run_id, row)}"
    job = _job_row(ctx, _job_key(spec.job_id, row))
    config = _config_row(spec, _cluster(spec.cluster, row))
    attributes = _attribute_rows(run_id, ctx.plan, row)
    submit = _submit_time(spec.submit_time, row)
    try:
        end = submit + timedelta(seconds=duration)
    except OverflowError as exc:
        raise row.fail(f"label column {spec.label.column!r} is out of range: {duration} s") from exc
    run = {
        "run_id": run_id,
        "job_id": job["job_id"],
        "submit_time": submit,
        "cluster_config_id": config["config_id"] if config else None,
        "parameters": _parameters(ctx.plan, row),
        "source": spec.source,
        "start_time": submit,
        "end_time": end,
        "duration_s": duration,
        "status": status,
    }
    return _RunRows(run, job, config, attributes)


def _config_row(spec: RunTableSpec, cluster: Row) -> Row | None:
    if not cluster:
        return None
    return {**cluster, "config_id": config_id(cluster), "source": spec.source}


def _job_row(ctx: _TableContext, key: str) -> Row:
    spec = ctx.mapping.spec
    definition = {"mapping": ctx.mapping.path.name, "source": spec.source}
    return {
        "job_id": f"{spec.source}:{key}",
        "name": key,
        "task_type": "dataset",
        "definition": json.dumps(definition),
        "source": spec.source,
    }


def _text(value: object) -> str:
    """A cell as id text: whole floats lose their ``.0``, booleans are lower case.

    >>> _text(4.0), _text(0.001), _text(True), _text("c4.large")
    ('4', '0.001', 'true', 'c4.large')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _number(value: object) -> float | None:
    """A finite number from a numeric or numeric-text cell, else None.

    >>> _number("1.5"), _number(3), _number("n/a"), _number(float("nan")), _number(True)
    (1.5, 3.0, None, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def to_seconds(value: float, unit: str) -> float:
    """Convert a duration in ``unit`` (s, ms, us, min, h) to seconds.

    >>> to_seconds(846235, "ms"), to_seconds(1.5, "min"), to_seconds(2, "h")
    (846.235, 90.0, 7200.0)
    """
    num, den = UNIT_SECONDS[unit]
    return value * num / den


def _render(template: str, row: _Row) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == FILE_PLACEHOLDER:
            return row.file
        value = row.get(name)
        if value is None:
            raise row.fail(f"template {template!r}: column {name!r} is empty")
        return _text(value)

    return _PLACEHOLDER.sub(fill, template)


def _column_text(column: str, row: _Row) -> str:
    value = row.get(column)
    if value is None:
        raise row.fail(f"id column {column!r} is empty")
    return _text(value)


def _run_key(spec: RunIdSpec, row: _Row) -> str:
    if spec.column is not None:
        return _column_text(spec.column, row)
    if spec.template is not None:
        return _render(spec.template, row)
    return f"{row.file}:{row.index + 1}"


def _job_key(spec: JobIdSpec, row: _Row) -> str:
    if spec.column is not None:
        return _column_text(spec.column, row)
    if spec.template is not None:
        return _render(spec.template, row)
    return spec.constant or ""


def _duration_s(spec: LabelSpec, row: _Row) -> float:
    raw = row.get(spec.column)
    if raw is None or raw == "":
        raise row.fail(f"label column {spec.column!r} is empty")
    value = _number(raw)
    if value is None:
        raise row.fail(f"label column {spec.column!r} is not a number: {shown(raw)}")
    if value < 0:
        raise row.fail(f"label column {spec.column!r} is negative: {shown(raw)}")
    return to_seconds(value, spec.unit)


def _status(spec: StatusSpec, row: _Row) -> str:
    """The status of the first matching rule, else the default."""
    matched = (r.status for r in spec.rules if _rule_matches(r, row.get(r.column)))
    return next(matched, spec.default)


def _rule_matches(rule: StatusRule, value: object) -> bool:
    """Whether a cell passes a status rule; text compares case-insensitively.

    >>> _rule_matches(StatusRule(column="ok", status="FAILED", equals="False"), False)
    True
    >>> _rule_matches(StatusRule(column="ok", status="FAILED", equals=False), "False")
    True
    >>> _rule_matches(StatusRule(column="t", status="TIMEOUT", at_least=7200), "7200.5")
    True
    """
    if isinstance(rule.equals, bool | str):
        return value is not None and _text(value).lower() == _text(rule.equals).lower()
    if rule.equals is not None:
        return _number(value) == float(rule.equals)
    number = _number(value)
    if number is None:
        return False
    if rule.below is not None:
        return number < rule.below
    return rule.at_least is not None and number >= rule.at_least


def _submit_time(spec: SubmitTimeSpec, row: _Row) -> datetime:
    if spec.column is None:
        # Row order stands in for time (docs/mappings.md, "synthetic submit time").
        step = timedelta(seconds=row.index * spec.synthetic_step_s)
        return _naive_utc(spec.synthetic_start) + step
    raw = row.get(spec.column)
    try:
        return _parse_time(raw, spec)
    except (TypeError, ValueError, OverflowError) as exc:
        raise row.fail(f"submit_time column {spec.column!r}: cannot read {raw!r} ({exc})") from exc


def _parse_time(raw: object, spec: SubmitTimeSpec) -> datetime:
    if isinstance(raw, datetime):
        return _naive_utc(raw)
    if isinstance(raw, date):
        return datetime(raw.year, raw.month, raw.day)
    if isinstance(raw, str) and spec.format is not None:
        return _naive_utc(datetime.strptime(raw, spec.format))
    number = _number(raw)
    if number is not None:
        return UNIX_EPOCH + timedelta(seconds=to_seconds(number, spec.unit))
    if isinstance(raw, str):
        return _naive_utc(datetime.fromisoformat(raw))
    raise ValueError("empty")


def _naive_utc(moment: datetime) -> datetime:
    """The warehouse stores naive UTC; naive input is taken as already UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _cluster(spec: ClusterSpec, row: _Row) -> Row:
    values = {name: _field_value(name, fs, row) for name, fs in spec.fields().items()}
    return {name: value for name, value in values.items() if value is not None}


def _field_value(name: str, fs: FieldSpec, row: _Row) -> object:
    if name in TEXT_FIELDS:
        cell = fs.value if fs.column is None else row.get(fs.column)
        return None if cell is None else _text(cell)
    number = _number(fs.value) if fs.column is None else _scaled(name, fs, row)
    if number is None:
        return None
    if name not in INTEGER_FIELDS:
        # 12 significant digits drop float noise (0.552 x 10 = 5.5200000000000005) from the id.
        return float(f"{number:.12g}")
    if abs(number - round(number)) > 1e-9:
        raise row.fail(f"cluster.{name}: {number} is not a whole number")
    if not 0 <= number < 1 << 31:
        raise row.fail(f"cluster.{name}: {number} is out of range (0 to 2^31-1)")
    return round(number)


def _scaled(name: str, fs: FieldSpec, row: _Row) -> float | None:
    """column x scale x times / divided_by; None when any of those cells is empty."""
    cells = {column: row.get(column) for column in fs.columns()}
    if any(cell is None for cell in cells.values()):
        return None
    numbers = {column: _number(cell) for column, cell in cells.items()}
    if any(n is None for n in numbers.values()):
        raise row.fail(f"cluster.{name}: not a number in {cells}")
    value = (numbers[fs.column or ""] or 0.0) * fs.scale
    if fs.times is not None:
        value *= numbers[fs.times] or 0.0
    if fs.divided_by is not None:
        if not numbers[fs.divided_by]:
            raise row.fail(f"cluster.{name}: {fs.divided_by!r} is zero")
        value /= numbers[fs.divided_by] or 1.0
    return value


def config_id(fields: Mapping[str, object]) -> str:
    """A stable id from a cluster configuration's content (key order does not matter).

    >>> a = config_id({"node_type": "m4.xlarge", "num_workers": 4})
    >>> a == config_id({"num_workers": 4, "node_type": "m4.xlarge"}), a.startswith("cfg-")
    (True, True)
    """
    return "cfg-" + hash_bytes(json.dumps(dict(fields), sort_keys=True).encode())[:16]


def _cell(value: object) -> tuple[float | None, str | None] | None:
    """A cell as (numeric value, text); None when the cell is empty or not a finite number.

    >>> _cell(3), _cell("sync"), _cell(True), _cell(None), _cell(float("nan"))
    ((3.0, None), (None, 'sync'), (None, 'true'), None, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return None, _text(value)
    if isinstance(value, int | float | Decimal):
        number = _number(value)
        return None if number is None else (number, None)
    if isinstance(value, datetime | date):
        return None, value.isoformat()
    return None, str(value)


def _attribute_rows(run_id: str, plan: Plan, row: _Row) -> list[Row]:
    rows = []
    for name, availability in plan:
        cell = _cell(row.get(name))
        if cell is not None:
            value, text = cell
            rows.append(
                {
                    "run_id": run_id,
                    "name": name,
                    "value": value,
                    "value_text": text,
                    "availability": str(availability),
                }
            )
    return rows


def _parameters(plan: Plan, row: _Row) -> str | None:
    """runs.parameters: the row's known-at-submit cells as one JSON object."""
    known = {name: _json_value(row.get(name)) for name, a in plan if a == KNOWN}
    known = {name: value for name, value in known.items() if value is not None}
    return json.dumps(known) if known else None


def _json_value(value: object) -> object:
    """A cell as JSON: whole numbers stay whole, times become ISO text, NaN becomes null.

    >>> _json_value(256), _json_value(0.5), _json_value(float("nan")), _json_value(date(2018, 1, 6))
    (256, 0.5, None, '2018-01-06')
    """
    if isinstance(value, bool | int | str):
        return value
    cell = _cell(value)
    if cell is None:
        return None
    return cell[0] if cell[0] is not None else cell[1]


def _write(con: duckdb.DuckDBPyConnection, batch: _Batch, digest: str, path: Path) -> int:
    """Write one table's rows in one transaction; returns how many jobs were new."""
    with transaction(con, str(path)):
        new_jobs = _insert_missing(con, "jobs", "job_id", list(batch.jobs.values()))
        _insert_missing(con, "cluster_configs", "config_id", list(batch.configs.values()))
        _replace_runs(con, batch)
        record_ingested(con, digest, path, "run_table")
        record_issues(con, batch.issues)
    return new_jobs


def _insert_missing(
    con: duckdb.DuckDBPyConnection, table_name: str, key: str, rows: list[Row]
) -> int:
    """Insert rows whose key is new; an existing job or config keeps its first source."""
    ids = [row[key] for row in rows]
    found = con.execute(
        f"SELECT {key} FROM {table_name} WHERE {key} IN (SELECT unnest(?::VARCHAR[]))", [ids]
    ).fetchall()
    existing = {r[0] for r in found}
    new = [row for row in rows if row[key] not in existing]
    insert_rows(con, table_name, new)
    return len(new)


def _replace_runs(con: duckdb.DuckDBPyConnection, batch: _Batch) -> None:
    # A changed table replaces its runs; their old attributes go so dropped columns do not linger.
    ids = list(batch.runs)
    con.execute("DELETE FROM run_attributes WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
    insert_rows(con, "runs", list(batch.runs.values()), replace=True)
    insert_rows(con, "run_attributes", batch.attributes)
