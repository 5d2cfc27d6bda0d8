"""One table row to the warehouse rows of its run, job, cluster config and attributes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from autofe.errors import IngestError
from autofe.ingest.eventlog.fields import shown
from autofe.ingest.run_table.cells import (
    attribute_cell,
    cell_text,
    finite_number,
    json_value,
    to_seconds,
)
from autofe.ingest.run_table.mapping import (
    FILE_PLACEHOLDER,
    INTEGER_FIELDS,
    PLACEHOLDER,
    TEXT_FIELDS,
    ClusterSpec,
    FieldSpec,
    JobIdSpec,
    LabelSpec,
    Plan,
    RunIdSpec,
    RunTableMapping,
    RunTableSpec,
    StatusRule,
    StatusSpec,
    SubmitTimeSpec,
)
from autofe.ingest.run_table.table_files import file_stem
from autofe.schema import Availability, IngestIssue
from autofe.warehouse.ledger import hash_bytes

Row = dict[str, Any]
KNOWN = Availability.KNOWN_AT_SUBMIT
UNIX_EPOCH = datetime(1970, 1, 1)


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
class TableContext:
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
class Batch:
    """Everything one table file adds, written in one transaction."""

    runs: dict[str, Row] = field(default_factory=dict)
    jobs: dict[str, Row] = field(default_factory=dict)
    configs: dict[str, Row] = field(default_factory=dict)
    attributes: list[Row] = field(default_factory=list)
    issues: list[IngestIssue] = field(default_factory=list)


def build_batch(
    ctx: TableContext, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> Batch:
    batch = Batch()
    stem = file_stem(ctx.path)
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


def _collect(batch: Batch, rows: _RunRows, row: _Row) -> None:
    run_id = rows.run["run_id"]
    if run_id in batch.runs:
        raise row.fail(f"duplicate run id {run_id!r} (the run_id column repeats)")
    batch.runs[run_id] = rows.run
    batch.jobs.setdefault(rows.job["job_id"], rows.job)
    if rows.config is not None:
        batch.configs.setdefault(rows.config["config_id"], rows.config)
    batch.attributes.extend(rows.attributes)


def _run_rows(ctx: TableContext, row: _Row) -> _RunRows:
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


def _job_row(ctx: TableContext, key: str) -> Row:
    spec = ctx.mapping.spec
    definition = {"mapping": ctx.mapping.path.name, "source": spec.source}
    return {
        "job_id": f"{spec.source}:{key}",
        "name": key,
        "task_type": "dataset",
        "definition": json.dumps(definition),
        "source": spec.source,
    }


def _render(template: str, row: _Row) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == FILE_PLACEHOLDER:
            return row.file
        value = row.get(name)
        if value is None:
            raise row.fail(f"template {template!r}: column {name!r} is empty")
        return cell_text(value)

    return PLACEHOLDER.sub(fill, template)


def _column_text(column: str, row: _Row) -> str:
    value = row.get(column)
    if value is None:
        raise row.fail(f"id column {column!r} is empty")
    return cell_text(value)


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
    value = finite_number(raw)
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
        return value is not None and cell_text(value).lower() == cell_text(rule.equals).lower()
    if rule.equals is not None:
        return finite_number(value) == float(rule.equals)
    number = finite_number(value)
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
    number = finite_number(raw)
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
        return None if cell is None else cell_text(cell)
    number = finite_number(fs.value) if fs.column is None else _scaled(name, fs, row)
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
    numbers = {column: finite_number(cell) for column, cell in cells.items()}
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


def _attribute_rows(run_id: str, plan: Plan, row: _Row) -> list[Row]:
    rows = []
    for name, availability in plan:
        cell = attribute_cell(row.get(name))
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
    known = {name: json_value(row.get(name)) for name, a in plan if a == KNOWN}
    known = {name: value for name, value in known.items() if value is not None}
    return json.dumps(known) if known else None
