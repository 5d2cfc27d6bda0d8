"""Runs: a run's ``runs`` row (label, timing, status, parameters), attributes and cluster."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofe.errors import IngestError
from autofe.ingest.eventlog.fields import MAX_EPOCH_MS
from autofe.ingest.workspace.api_values import (
    SOURCE,
    Json,
    dict_of,
    dicts_of,
    epoch_ms,
    id_text,
    utc_time,
)
from autofe.ingest.workspace.catalog import Catalog
from autofe.ingest.workspace.clusters import config_id, config_row
from autofe.ingest.workspace.jobs import script_text, scripts_of, tasks_of
from autofe.schema import Availability, IngestIssue


@dataclass(frozen=True)
class RunTiming:
    """A run's wall-clock split in parts, in ms (None where the API did not report them)."""

    exec_start_ms: int | None
    duration_ms: int | None
    setup_ms: int | None
    cleanup_ms: int | None


def run_timing(run: Mapping[str, Any]) -> RunTiming:
    """Split a run into setup, execution (the label) and cleanup, from what the API reports.

    Single-task runs report ``execution_duration``. Multi-task runs report zeros there, so
    execution is the window from the first task's execution start to the last task's
    execution end. Without either, ``run_duration`` (or end - start) minus setup and cleanup.

    >>> t = run_timing({"start_time": 1000, "setup_duration": 200,
    ...     "execution_duration": 5000, "cleanup_duration": 100, "end_time": 6300})
    >>> (t.exec_start_ms, t.duration_ms, t.setup_ms, t.cleanup_ms)
    (1200, 5000, 200, 100)
    >>> run_timing({"start_time": 1000, "end_time": 9000, "run_duration": 8000,
    ...     "tasks": [{"start_time": 1000, "setup_duration": 3000, "execution_duration": 4000,
    ...                "cleanup_duration": 500}]})
    RunTiming(exec_start_ms=4000, duration_ms=4000, setup_ms=3000, cleanup_ms=1000)
    """
    start, end = epoch_ms(run.get("start_time")), epoch_ms(run.get("end_time"))
    setup, cleanup = _nonneg(run.get("setup_duration")), _nonneg(run.get("cleanup_duration"))
    execution = epoch_ms(run.get("execution_duration"))
    if execution is not None:
        return RunTiming(_plus(start, setup), execution, setup, cleanup)
    windows = [w for t in dicts_of(run.get("tasks")) if (w := _task_window(t))]
    if windows and start is not None:
        first, last = min(w[0] for w in windows), max(w[1] for w in windows)
        return RunTiming(first, last - first, first - start, end - last if end else None)
    total = epoch_ms(run.get("run_duration")) or (end - start if start and end else None)
    if total is None:
        return RunTiming(_plus(start, setup), None, setup, cleanup)
    return RunTiming(_plus(start, setup), total - (setup or 0) - (cleanup or 0), setup, cleanup)


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def _nonneg(value: Any) -> int | None:
    """A duration or count as an int; None when it is no number or no plausible one.

    >>> _nonneg(1500), _nonneg(2.5), _nonneg(True), _nonneg(float("inf")), _nonneg("1")
    (1500, 2, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if math.isfinite(value) and abs(value) <= MAX_EPOCH_MS else None


def _plus(start: int | None, setup: int | None) -> int | None:
    return None if start is None else start + (setup or 0)


def _task_window(task: Mapping[str, Any]) -> tuple[int, int] | None:
    """[execution start, execution end] of a task run, in epoch ms."""
    start, execution = epoch_ms(task.get("start_time")), epoch_ms(task.get("execution_duration"))
    if start is None or execution is None:
        return None
    begin = start + (_nonneg(task.get("setup_duration")) or 0)
    return begin, begin + execution


_RESULT_STATUS = {
    "SUCCESS": "SUCCEEDED",
    "SUCCESS_WITH_FAILURES": "SUCCEEDED_WITH_FAILURES",
    "FAILED": "FAILED",
    "UPSTREAM_FAILED": "FAILED",
    "TIMEDOUT": "TIMEDOUT",
    "CANCELED": "CANCELED",
    "UPSTREAM_CANCELED": "CANCELED",
    "MAXIMUM_CONCURRENT_RUNS_REACHED": "SKIPPED",
    "EXCLUDED": "SKIPPED",
    "DISABLED": "SKIPPED",
}
_LIFE_CYCLE_STATUS = {"INTERNAL_ERROR": "FAILED", "SKIPPED": "SKIPPED"}


def run_status(run: Mapping[str, Any]) -> str | None:
    """Warehouse status from ``state.result_state`` (or the newer ``status`` object).

    >>> run_status({"state": {"life_cycle_state": "TERMINATED", "result_state": "FAILED"}})
    'FAILED'
    >>> run_status({"state": {"life_cycle_state": "RUNNING"}})
    'INCOMPLETE'
    >>> run_status({"status": {"state": "TERMINATED", "termination_details": {"code": "SUCCESS"}}})
    'SUCCEEDED'
    """
    state = dict_of(run.get("state"))
    if result := state.get("result_state"):
        return _RESULT_STATUS.get(str(result), str(result))
    if life_cycle := state.get("life_cycle_state"):
        return _LIFE_CYCLE_STATUS.get(str(life_cycle), "INCOMPLETE")
    status = dict_of(run.get("status"))
    if not status:
        return None
    if status.get("state") != "TERMINATED":
        return "INCOMPLETE"
    code = str(dict_of(status.get("termination_details")).get("code") or "")
    return "SUCCEEDED" if code == "SUCCESS" else "CANCELED" if "CANCEL" in code else "FAILED"


_OVERRIDE_KEYS = (
    "notebook_params",
    "python_params",
    "python_named_params",
    "jar_params",
    "spark_submit_params",
    "sql_params",
)


def run_parameters(run: Mapping[str, Any]) -> str | None:
    """Parameters chosen at submit, as JSON: job parameters and per-task-kind overrides.

    >>> run_parameters({"job_parameters": [{"name": "day", "default": "", "value": "mon"}],
    ...     "overriding_parameters": {"python_params": ["--full"]}})
    '{"job_parameters": {"day": "mon"}, "python_params": ["--full"]}'
    """
    params: Json = {}
    named = {
        str(p["name"]): p.get("value", p.get("default"))
        for p in dicts_of(run.get("job_parameters"))
        if "name" in p
    }
    if named:
        params["job_parameters"] = named
    for holder in (dict_of(run.get("overriding_parameters")), run):
        for key in _OVERRIDE_KEYS:
            if holder.get(key):
                params.setdefault(key, holder[key])
    return json.dumps(params, sort_keys=True) if params else None


def _cluster_ref(holders: Iterable[Any]) -> tuple[str, Any] | None:
    """The first cluster named by a run's spec, its tasks, or (failing those) its job."""
    for holder in holders:
        for key in ("new_cluster", "existing_cluster_id", "job_cluster_key"):
            if isinstance(holder, dict) and holder.get(key):
                return key, holder[key]
    return None


def _run_cluster(run: Json, settings: Json, cat: Catalog, path: Path) -> Json | None:
    """The cluster spec a run was submitted with.

    A run's own spec wins over its job's current settings, which may have changed since.
    SQL-warehouse and serverless tasks name no cluster: None.

    Raises:
        IngestError: the run names a cluster or job cluster the workspace does not describe.
    """
    holders = (run.get("cluster_spec"), run, *tasks_of(run), settings, *tasks_of(settings))
    ref = _cluster_ref(holders)
    if ref is None:
        return None
    kind, value = ref
    if kind == "new_cluster":
        return dict_of(value)
    if kind == "existing_cluster_id":
        spec = cat.clusters[str(value)].data if str(value) in cat.clusters else None
    else:
        job_clusters = [*dicts_of(settings.get("job_clusters")), *dicts_of(run.get("job_clusters"))]
        specs = {c.get("job_cluster_key"): dict_of(c.get("new_cluster")) for c in job_clusters}
        spec = specs.get(str(value))
    if not spec:
        what = "cluster" if kind == "existing_cluster_id" else "job cluster"
        raise IngestError(str(path), f"run {run['run_id']}: unknown {what} {value!r}")
    return spec


def run_rows(
    run: Json, cat: Catalog, path: Path
) -> tuple[dict[str, list[Json]], list[IngestIssue]]:
    """Rows for one run: runs, run_attributes and the cluster config it used.

    An unknown cluster is an issue that leaves ``cluster_config_id`` NULL: the run's label and
    timing are still good training data.
    """
    run_id = str(run["run_id"])
    job = cat.jobs.get(id_text(run.get("job_id")) or "")
    settings = dict_of(job.data.get("settings")) if job else {}
    issues: list[IngestIssue] = []
    try:
        spec = _run_cluster(run, settings, cat, path)
    except IngestError as exc:
        spec, issues = None, [IngestIssue(exc.path, exc.reason, exc.line)]
    timing = run_timing(run)
    job_script = script_text(scripts_of(cat, tasks_of(settings)))
    own_script = script_text(scripts_of(cat, tasks_of(run)))
    row = {
        "run_id": run_id,
        "job_id": id_text(run.get("job_id")),
        "submit_time": utc_time(epoch_ms(run.get("start_time"))),
        "cluster_config_id": config_id(spec) if spec else None,
        "parameters": run_parameters(run),
        "script_text": own_script if own_script != job_script else None,
        "source": SOURCE,
        "start_time": utc_time(timing.exec_start_ms),
        "end_time": utc_time(epoch_ms(run.get("end_time"))),
        "duration_s": _seconds(timing.duration_ms),
        "status": run_status(run),
    }
    rows = {
        "runs": [row],
        "run_attributes": [
            *_run_attributes(run_id, run, timing),
            *_tag_attributes(run_id, run, spec),
        ],
        "cluster_configs": [config_row(spec, cat)] if spec else [],
    }
    return rows, issues


ATTRIBUTES = ("setup_duration_s", "cleanup_duration_s", "queue_duration_s", "attempt_number")


def _run_attributes(run_id: str, run: Mapping[str, Any], timing: RunTiming) -> list[Json]:
    """Setup, cleanup and queue time (known only after the run) and the retry attempt."""
    post, known = Availability.POST_EXECUTION.value, Availability.KNOWN_AT_SUBMIT.value
    values = (
        (ATTRIBUTES[0], _seconds(timing.setup_ms), post),
        (ATTRIBUTES[1], _seconds(timing.cleanup_ms), post),
        (ATTRIBUTES[2], _seconds(_nonneg(run.get("queue_duration"))), post),
        (ATTRIBUTES[3], _nonneg(run.get("attempt_number")), known),
    )
    return [
        {"run_id": run_id, "name": name, "value": value, "availability": availability}
        for name, value, availability in values
        if value is not None
    ]


TAG_PREFIX = "tag."


def _tag_attributes(run_id: str, run: Mapping[str, Any], spec: Json | None) -> list[Json]:
    """The run's tags and its cluster's ``custom_tags`` as ``tag.<key>`` attributes.

    Both are set before submission (cost attribution, dataset or tier labels), so they are
    known at submit; a run tag wins over a cluster tag of the same key.
    """
    tags = {**dict_of((spec or {}).get("custom_tags")), **dict_of(run.get("tags"))}
    known = Availability.KNOWN_AT_SUBMIT.value
    rows = []
    for key, raw in sorted(tags.items()):
        if raw is None:
            continue
        value = _tag_number(raw)
        text = None if value is not None else str(raw)
        rows.append(
            {"run_id": run_id, "name": TAG_PREFIX + str(key), "value": value,
             "value_text": text, "availability": known}
        )  # fmt: skip
    return rows


def _tag_number(raw: Any) -> float | None:
    """Numbers, booleans and numeric strings as a number; anything else is text.

    >>> _tag_number("0.834"), _tag_number(True), _tag_number("SingleNode")
    (0.834, 1.0, None)
    """
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None
