"""Ingest a Databricks workspace export: jobs, runs, clusters, scripts, table stats, event logs.

A workspace is what a user exports with the Databricks CLI / REST API (``jobs/list``,
``jobs/runs/list``, ``runs/get``, ``clusters/get``) plus the cluster log delivery folder. The
layout, what each file must contain and the rules that link event logs to runs are documented
in ``docs/workspace.md``.

Every JSON (or CSV) file is one ledger entry, stored whole or not at all. Its ledger hash covers the
file's bytes *and* the rows derived from it, because a run's row also depends on other files
(a ``runs/get`` merged over a ``runs/list`` entry, the job's settings, a ``clusters/get``
file): when any of them changes, the affected rows are upserted again, and when nothing
changed re-ingesting adds nothing. Files are written a few hundred per transaction (one
transaction per file spent 14-19 ms a file, most of a 100x replica's ingest); when a batch is
refused it is written again file by file, so the error names the file and the files before it
are kept, as before.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import duckdb

from autofe.errors import IngestError, WarehouseError
from autofe.ingest.conform import UnstorableKey, conform_row
from autofe.ingest.eventlog.fields import MAX_EPOCH_MS, shown
from autofe.schema import Availability, IngestIssue, IngestReport
from autofe.special_file import special_file
from autofe.warehouse.ledger import (
    hash_bytes,
    ingested_among,
    record_ingested_many,
    record_issues,
)
from autofe.warehouse.tables import table
from autofe.warehouse.write import insert_rows, transaction

log = logging.getLogger(__name__)

Json = dict[str, Any]
SOURCE = "workspace"
LEDGER_KIND = "workspace_json"

RUN_ID_PROP = "spark.databricks.job.runId"
PARENT_RUN_ID_PROP = "spark.databricks.job.parentRunId"
CLUSTER_ID_PROP = "spark.databricks.clusterUsageTags.clusterId"


@dataclass(frozen=True)
class AppFacts:
    """What the event-log ingester knows about one Spark application, for linking it to a run."""

    app_id: str
    start_ms: int | None
    end_ms: int | None
    properties: Mapping[str, str]
    path: Path


AppLinker = Callable[[AppFacts], str | None]
IngestLogs = Callable[[list[Path], AppLinker], None]
"""The caller's event-log ingester: log paths (files or rolled-log folders) and a linker."""


# --------------------------------------------------------------------------- input files


@dataclass(frozen=True)
class _Input:
    """One input file: its bytes (part of its ledger identity) and parsed content."""

    path: Path
    kind: str
    data: bytes
    content: Any = None
    problem: IngestIssue | None = None


_JSON_KINDS = ("node_types", "clusters", "jobs", "runs", "table_stats")


def is_workspace(path: Path) -> bool:
    """A folder laid out like a workspace export: a ``jobs.json``, or JSON in ``jobs/``/``runs/``.

    >>> is_workspace(Path("/no/such/folder"))
    False
    """
    if not path.is_dir():
        return False
    folders = (path / "jobs", path / "runs")
    return (path / "jobs.json").is_file() or any(any(f.glob("*.json")) for f in folders)


def _input_paths(root: Path, kind: str) -> list[Path]:
    """``<kind>.json`` at the root, then the JSON (and, for table stats, CSV) in ``<kind>/``."""
    single = [root / f"{kind}.json"] if _file_like(root / f"{kind}.json") else []
    folder = root / kind
    suffixes = (".json", ".csv") if kind == "table_stats" else (".json",)
    files = sorted(p for p in folder.glob("*") if p.suffix in suffixes) if folder.is_dir() else []
    return single + [p for p in files if _file_like(p)]


def _file_like(path: Path) -> bool:
    """A file, or a FIFO, device or socket named like one (listed, to be refused by name)."""
    return path.is_file() or special_file(path) is not None


def _read_input(path: Path, kind: str) -> _Input:
    """Read and parse one file; an unreadable or unparseable file becomes a fatal issue."""
    refused = special_file(path)
    if refused:
        return _Input(path, kind, b"", problem=_issue(path, refused, True))
    try:
        data = path.read_bytes()
    except OSError as exc:
        return _Input(path, kind, b"", problem=_issue(path, f"cannot read: {exc.strerror}", True))
    try:
        return _Input(path, kind, data, content=_parse(path, data))
    except IngestError as exc:
        return _Input(path, kind, data, problem=IngestIssue(exc.path, exc.reason, exc.line, True))


def _parse(path: Path, data: bytes) -> Any:
    """JSON content, or for a ``.csv`` the ``(line, row)`` pairs of its records.

    Raises:
        IngestError: the file is not UTF-8 or not valid JSON (with the line of the error).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(str(path), f"not UTF-8 text: {exc.reason}") from exc
    if path.suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        return [(reader.line_num, row) for row in reader]
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(str(path), f"invalid JSON: {exc.msg}", exc.lineno) from exc


def _issue(path: Path, reason: str, fatal: bool = False, line: int | None = None) -> IngestIssue:
    return IngestIssue(str(path), reason, line, fatal)


# --------------------------------------------------------------------------- small parsers


def _ms(value: Any) -> int | None:
    """An API epoch-ms value; the Jobs API writes 0 for "not yet" (e.g. end of a running run).

    >>> _ms(1707850685000), _ms(0), _ms(None), _ms("x"), _ms(1e300), _ms(float("nan"))
    (1707850685000, None, None, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not (0 < value <= MAX_EPOCH_MS):  # also NaN, which Python's json reads
        return None
    return int(value)


def _ts(ms: int | None) -> datetime | None:
    """Epoch ms to the naive UTC timestamp the warehouse stores.

    >>> _ts(1707850685000), _ts(10**18)
    (datetime.datetime(2024, 2, 13, 18, 58, 5), None)
    """
    if ms is None or not 0 <= ms <= MAX_EPOCH_MS:  # a sum of two API values can overflow
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def _text(value: Any) -> str | None:
    """An id as text (the API writes ids as numbers, the warehouse keys are strings)."""
    return None if value is None or value == "" else str(value)


def _dicts(value: Any) -> list[Json]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _dict(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


_PAGINATION = frozenset({"has_more", "next_page_token", "prev_page_token"})


def _records(content: Any, list_key: str, path: Path) -> list[Any]:
    """The objects of a list response (``{"jobs": [...]}``, a bare array) or one get response.

    Raises:
        IngestError: the content is neither.
    """
    if isinstance(content, dict):
        if list_key in content:
            if not isinstance(content[list_key], list):
                raise IngestError(str(path), f"{list_key!r} is not a list")
            return list(content[list_key])
        return [] if set(content) <= _PAGINATION else [content]
    if isinstance(content, list):
        return content
    raise IngestError(str(path), f"expected a JSON object or a {list_key!r} list")


# --------------------------------------------------------------------------- catalog


@dataclass
class _Record:
    """One job, run or cluster merged over the files that mention it; ``owner`` writes it."""

    data: Json
    owner: Path


@dataclass
class _Catalog:
    """Everything the workspace defines, merged across files."""

    root: Path
    node_specs: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    clusters: dict[str, _Record] = field(default_factory=dict)
    jobs: dict[str, _Record] = field(default_factory=dict)
    runs: dict[str, _Record] = field(default_factory=dict)
    issues: dict[Path, list[IngestIssue]] = field(default_factory=dict)
    script_texts: dict[str, str | None] = field(default_factory=dict)
    owners: dict[str, dict[Path, list[_Record]]] = field(default_factory=dict)

    def owned(self, kind: str, path: Path) -> list[_Record]:
        """The ``kind`` records whose winning version came from ``path``, in catalog order.

        Indexed once per kind after the merge: a scan per file made ingest quadratic in the
        number of workspace files.
        """
        if kind not in self.owners:
            index: dict[Path, list[_Record]] = {}
            for record in getattr(self, kind).values():
                index.setdefault(record.owner, []).append(record)
            self.owners[kind] = index
        return self.owners[kind].get(path, [])

    def note(self, path: Path, reason: str) -> None:
        self.issues.setdefault(path, []).append(_issue(path, reason))

    def script(self, ref: str) -> str | None:
        """Text of a referenced script, read once however many runs name it."""
        if ref not in self.script_texts:
            path = resolve_script(self.root, ref)
            text = path.read_text(encoding="utf-8", errors="replace") if path else None
            self.script_texts[ref] = text
        return self.script_texts[ref]


_ID_KEYS = {"jobs": "job_id", "runs": "run_id", "clusters": "cluster_id"}


def _catalog(root: Path, inputs: Sequence[_Input]) -> _Catalog:
    cat = _Catalog(root)
    # List responses first, then get responses, so a runs/get merged over its list entry wins.
    ordered = sorted(inputs, key=lambda i: isinstance(i.content, dict) and _is_get(i))
    for item in ordered:
        if item.problem is None and item.kind in _ID_KEYS:
            _merge_file(cat, item)
        elif item.problem is None and item.kind == "node_types":
            _node_specs(cat, item)
    return cat


def _is_get(item: _Input) -> bool:
    return _ID_KEYS.get(item.kind, "") in item.content


def _merge_file(cat: _Catalog, item: _Input) -> None:
    """Merge a file's objects into the catalog; objects without their id become issues."""
    id_key = _ID_KEYS[item.kind]
    table: dict[str, _Record] = getattr(cat, item.kind)
    try:
        objects = _records(item.content, item.kind, item.path)
    except IngestError as exc:
        cat.note(item.path, exc.reason)
        return
    for n, obj in enumerate(objects):
        key = _text(obj.get(id_key)) if isinstance(obj, dict) else None
        if key is None:
            cat.note(item.path, f"{item.kind}[{n}] has no {id_key}; skipped")
            continue
        old = table.get(key)
        table[key] = _Record({**(old.data if old else {}), **obj}, item.path)


def _node_specs(cat: _Catalog, item: _Input) -> None:
    """vCPUs and memory per node type from ``clusters/list-node-types`` output."""
    for node in _dicts(_dict(item.content).get("node_types")):
        cores, memory_mb = node.get("num_cores"), node.get("memory_mb")
        cat.node_specs[str(node.get("node_type_id"))] = (
            float(cores) if isinstance(cores, int | float) else None,
            memory_mb / 1024 if isinstance(memory_mb, int | float) else None,
        )


# --------------------------------------------------------------------------- clusters

_CONFIG_KEYS = (
    "spark_version",
    "node_type_id",
    "driver_node_type_id",
    "num_workers",
    "autoscale",
    "aws_attributes",
    "azure_attributes",
    "gcp_attributes",
    "spark_conf",
    "instance_pool_id",
    "driver_instance_pool_id",
    "runtime_engine",
    "enable_elastic_disk",
)


def _config_content(spec: Mapping[str, Any]) -> Json:
    """The part of a cluster spec that shapes performance and cost, normalised.

    Identity and state fields (cluster_id, name, state, driver/executor instances) are left
    out, so a ``clusters/get`` of an all-purpose cluster and an equal ``new_cluster`` agree.
    """
    content = {k: spec[k] for k in _CONFIG_KEYS if spec.get(k) not in (None, {}, "")}
    if content.get("autoscale"):
        content.pop("num_workers", None)  # clusters/get reports the current size there
    if "node_type_id" in content:
        content.setdefault("driver_node_type_id", content["node_type_id"])  # API default
    return content


def config_id(spec: Mapping[str, Any]) -> str:
    """Stable id of a cluster configuration: a hash of its normalised content.

    >>> a = {"node_type_id": "m5.xlarge", "num_workers": 2, "cluster_name": "etl"}
    >>> config_id(a) == config_id({"num_workers": 2, "node_type_id": "m5.xlarge"})
    True
    >>> config_id(a) == config_id({"node_type_id": "m5.xlarge", "num_workers": 3})
    False
    """
    canonical = json.dumps(_config_content(spec), sort_keys=True, default=str)
    return "dbx-" + hash_bytes(canonical.encode())[:16]


def spot_policy(spec: Mapping[str, Any]) -> str | None:
    """on_demand | spot | spot_with_fallback from the cloud attributes (NULL if not stated).

    >>> spot_policy({"aws_attributes": {"availability": "SPOT_WITH_FALLBACK"}})
    'spot_with_fallback'
    >>> spot_policy({"azure_attributes": {"availability": "SPOT_AZURE"}})
    'spot'
    >>> spot_policy({"gcp_attributes": {"availability": "ON_DEMAND_GCP"}})
    'on_demand'
    >>> spot_policy({"num_workers": 2}) is None
    True
    """
    for key in ("aws_attributes", "azure_attributes", "gcp_attributes"):
        availability = str(_dict(spec.get(key)).get("availability") or "").upper()
        if "FALLBACK" in availability:
            return "spot_with_fallback"
        if availability.startswith(("SPOT", "PREEMPTIBLE")):
            return "spot"
        if availability.startswith("ON_DEMAND"):
            return "on_demand"
    if _dict(spec.get("gcp_attributes")).get("use_preemptible_executors"):
        return "spot"
    return None


def _config_row(spec: Mapping[str, Any], cat: _Catalog) -> Json:
    content = _config_content(spec)
    auto = _dict(content.get("autoscale"))
    vcpu, memory_gb = cat.node_specs.get(str(content.get("node_type_id")), (None, None))
    return {
        "config_id": config_id(spec),
        "node_type": content.get("node_type_id"),
        "driver_node_type": content.get("driver_node_type_id"),
        "vcpu_per_node": vcpu,
        "memory_gb_per_node": memory_gb,
        "num_workers": content.get("num_workers"),
        "autoscale_min": auto.get("min_workers"),
        "autoscale_max": auto.get("max_workers"),
        "spot_policy": spot_policy(content),
        "spark_version": content.get("spark_version"),
        "spark_conf": json.dumps(content["spark_conf"]) if content.get("spark_conf") else None,
        "hourly_price": None,
        "source": SOURCE,
    }


# --------------------------------------------------------------------------- jobs and scripts

_TASK_KINDS = {
    "notebook_task": "notebook",
    "spark_python_task": "python",
    "python_wheel_task": "python",
    "sql_task": "sql",
    "spark_jar_task": "jar",
    "spark_submit_task": "spark_submit",
    "pipeline_task": "pipeline",
    "dbt_task": "dbt",
    "run_job_task": "run_job",
}


def _tasks(holder: Mapping[str, Any]) -> list[Json]:
    """Tasks of job settings or a run; Jobs API 2.0 keeps the single task at the top level."""
    tasks = _dicts(holder.get("tasks"))
    return tasks or ([dict(holder)] if any(k in holder for k in _TASK_KINDS) else [])


def task_kind(task: Mapping[str, Any]) -> str | None:
    """The warehouse task type of one Jobs API task.

    >>> task_kind({"task_key": "t", "spark_python_task": {"python_file": "etl.py"}})
    'python'
    """
    return next((kind for key, kind in _TASK_KINDS.items() if key in task), None)


def _task_type(tasks: Iterable[Mapping[str, Any]]) -> str | None:
    """One kind for a job: its tasks' kind, or ``multi`` when they differ."""
    kinds = {k for t in tasks if (k := task_kind(t))}
    return (kinds.pop() if len(kinds) == 1 else "multi") if kinds else None


def script_ref(task: Mapping[str, Any]) -> str | None:
    """The script a task runs, as the job settings name it.

    >>> script_ref({"sql_task": {"file": {"path": "queries/q.sql"}, "warehouse_id": "w"}})
    'queries/q.sql'
    >>> script_ref({"spark_submit_task": {"parameters": ["--conf", "a=b", "dbfs:/x/job.py"]}})
    'dbfs:/x/job.py'
    """
    refs = (
        _dict(task.get("notebook_task")).get("notebook_path"),
        _dict(task.get("spark_python_task")).get("python_file"),
        _dict(_dict(task.get("sql_task")).get("file")).get("path"),
        *(
            p
            for p in _dict(task.get("spark_submit_task")).get("parameters") or []
            if isinstance(p, str) and p.endswith((".py", ".sql"))
        ),
    )
    return next((r for r in refs if isinstance(r, str) and r), None)


def _ref_parts(ref: str) -> list[str]:
    """Path components of a script reference, without URI scheme and without ``..``.

    >>> _ref_parts("dbfs:/FileStore/etl/job.py")
    ['FileStore', 'etl', 'job.py']
    >>> _ref_parts("/Workspace/Shared/../x")
    ['Workspace', 'Shared', 'x']
    """
    path = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]+:/*", "", ref)
    return [p for p in PurePosixPath(path).parts if p not in ("/", ".", "..")]


def resolve_script(root: Path, ref: str) -> Path | None:
    """Find a referenced script inside the workspace export.

    The reference is a Databricks path (``/Workspace/Shared/etl/job.py``, ``dbfs:/…``, a repo
    path); the export keeps some suffix of it under the root or under ``scripts/``, and
    notebooks are exported with a ``.py`` / ``.sql`` suffix their workspace path lacks. The
    longest matching suffix wins; nothing outside the root is ever read.
    """
    parts, inside = _ref_parts(ref), root.resolve()
    for start in range(len(parts)):
        for base in (root, root / "scripts"):
            for suffix in ("", ".py", ".sql"):
                cand = base.joinpath(*parts[start:-1], parts[-1] + suffix)
                if cand.is_file() and cand.resolve().is_relative_to(inside):
                    return cand
    return None


@dataclass(frozen=True)
class _Script:
    task_key: str
    ref: str
    text: str | None


def _scripts(cat: _Catalog, tasks: Iterable[Mapping[str, Any]]) -> list[_Script]:
    return [
        _Script(str(task.get("task_key") or ""), ref, cat.script(ref))
        for task in tasks
        if (ref := script_ref(task))
    ]


def _script_text(scripts: Sequence[_Script]) -> str | None:
    """One task's script as is; several tasks' scripts each under a ``==== task`` header."""
    texts = [s for s in scripts if s.text is not None]
    if len(scripts) == 1:
        return scripts[0].text
    return "\n".join(f"==== task {s.task_key}: {s.ref} ====\n{s.text}" for s in texts) or None


def _job_rows(
    job: Json, cat: _Catalog, path: Path
) -> tuple[dict[str, list[Json]], list[IngestIssue]]:
    """The jobs row, the cluster configs its settings define, and its scripts not found."""
    settings = _dict(job.get("settings"))
    tasks = _tasks(settings)
    scripts = _scripts(cat, tasks)
    row = {
        "job_id": str(job["job_id"]),
        "name": settings.get("name"),
        "task_type": _task_type(tasks),
        "script_path": scripts[0].ref if scripts else None,
        "script_text": _script_text(scripts),
        "definition": json.dumps(settings),
        "created_time": _ts(_ms(job.get("created_time"))),
        "source": SOURCE,
    }
    specs = [_dict(c.get("new_cluster")) for c in _dicts(settings.get("job_clusters"))]
    specs += [_dict(h.get("new_cluster")) for h in (settings, *tasks)]
    missing = [
        _issue(path, f"job {row['job_id']}: script {s.ref!r} of task {s.task_key!r} not found")
        for s in scripts
        if s.text is None
    ]
    return {"jobs": [row], "cluster_configs": [_config_row(s, cat) for s in specs if s]}, missing


# --------------------------------------------------------------------------- runs


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
    start, end = _ms(run.get("start_time")), _ms(run.get("end_time"))
    setup, cleanup = _nonneg(run.get("setup_duration")), _nonneg(run.get("cleanup_duration"))
    execution = _ms(run.get("execution_duration"))
    if execution is not None:
        return RunTiming(_plus(start, setup), execution, setup, cleanup)
    windows = [w for t in _dicts(run.get("tasks")) if (w := _task_window(t))]
    if windows and start is not None:
        first, last = min(w[0] for w in windows), max(w[1] for w in windows)
        return RunTiming(first, last - first, first - start, end - last if end else None)
    total = _ms(run.get("run_duration")) or (end - start if start and end else None)
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
    start, execution = _ms(task.get("start_time")), _ms(task.get("execution_duration"))
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
    state = _dict(run.get("state"))
    if result := state.get("result_state"):
        return _RESULT_STATUS.get(str(result), str(result))
    if life_cycle := state.get("life_cycle_state"):
        return _LIFE_CYCLE_STATUS.get(str(life_cycle), "INCOMPLETE")
    status = _dict(run.get("status"))
    if not status:
        return None
    if status.get("state") != "TERMINATED":
        return "INCOMPLETE"
    code = str(_dict(status.get("termination_details")).get("code") or "")
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
        for p in _dicts(run.get("job_parameters"))
        if "name" in p
    }
    if named:
        params["job_parameters"] = named
    for holder in (_dict(run.get("overriding_parameters")), run):
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


def _run_cluster(run: Json, settings: Json, cat: _Catalog, path: Path) -> Json | None:
    """The cluster spec a run was submitted with.

    A run's own spec wins over its job's current settings, which may have changed since.
    SQL-warehouse and serverless tasks name no cluster: None.

    Raises:
        IngestError: the run names a cluster or job cluster the workspace does not describe.
    """
    holders = (run.get("cluster_spec"), run, *_tasks(run), settings, *_tasks(settings))
    ref = _cluster_ref(holders)
    if ref is None:
        return None
    kind, value = ref
    if kind == "new_cluster":
        return _dict(value)
    if kind == "existing_cluster_id":
        spec = cat.clusters[str(value)].data if str(value) in cat.clusters else None
    else:
        job_clusters = [*_dicts(settings.get("job_clusters")), *_dicts(run.get("job_clusters"))]
        specs = {c.get("job_cluster_key"): _dict(c.get("new_cluster")) for c in job_clusters}
        spec = specs.get(str(value))
    if not spec:
        what = "cluster" if kind == "existing_cluster_id" else "job cluster"
        raise IngestError(str(path), f"run {run['run_id']}: unknown {what} {value!r}")
    return spec


def _run_rows(
    run: Json, cat: _Catalog, path: Path
) -> tuple[dict[str, list[Json]], list[IngestIssue]]:
    """Rows for one run: runs, run_attributes and the cluster config it used.

    An unknown cluster is an issue that leaves ``cluster_config_id`` NULL: the run's label and
    timing are still good training data.
    """
    run_id = str(run["run_id"])
    job = cat.jobs.get(_text(run.get("job_id")) or "")
    settings = _dict(job.data.get("settings")) if job else {}
    issues: list[IngestIssue] = []
    try:
        spec = _run_cluster(run, settings, cat, path)
    except IngestError as exc:
        spec, issues = None, [IngestIssue(exc.path, exc.reason, exc.line)]
    timing = run_timing(run)
    job_script = _script_text(_scripts(cat, _tasks(settings)))
    own_script = _script_text(_scripts(cat, _tasks(run)))
    row = {
        "run_id": run_id,
        "job_id": _text(run.get("job_id")),
        "submit_time": _ts(_ms(run.get("start_time"))),
        "cluster_config_id": config_id(spec) if spec else None,
        "parameters": run_parameters(run),
        "script_text": own_script if own_script != job_script else None,
        "source": SOURCE,
        "start_time": _ts(timing.exec_start_ms),
        "end_time": _ts(_ms(run.get("end_time"))),
        "duration_s": _seconds(timing.duration_ms),
        "status": run_status(run),
    }
    rows = {
        "runs": [row],
        "run_attributes": [
            *_run_attributes(run_id, run, timing),
            *_tag_attributes(run_id, run, spec),
        ],
        "cluster_configs": [_config_row(spec, cat)] if spec else [],
    }
    return rows, issues


_ATTRIBUTES = ("setup_duration_s", "cleanup_duration_s", "queue_duration_s", "attempt_number")


def _run_attributes(run_id: str, run: Mapping[str, Any], timing: RunTiming) -> list[Json]:
    """Setup, cleanup and queue time (known only after the run) and the retry attempt."""
    post, known = Availability.POST_EXECUTION.value, Availability.KNOWN_AT_SUBMIT.value
    values = (
        (_ATTRIBUTES[0], _seconds(timing.setup_ms), post),
        (_ATTRIBUTES[1], _seconds(timing.cleanup_ms), post),
        (_ATTRIBUTES[2], _seconds(_nonneg(run.get("queue_duration"))), post),
        (_ATTRIBUTES[3], _nonneg(run.get("attempt_number")), known),
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
    tags = {**_dict((spec or {}).get("custom_tags")), **_dict(run.get("tags"))}
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


# --------------------------------------------------------------------------- table stats


def _stats_rows(item: _Input) -> tuple[list[Json], list[IngestIssue]]:
    """table_stats rows from a CSV (with header) or JSON list of snapshot objects."""
    if item.path.suffix == ".csv":
        numbered = list(item.content)
    else:
        numbered = [(None, r) for r in _records(item.content, "table_stats", item.path)]
    rows: list[Json] = []
    issues: list[IngestIssue] = []
    for n, (line, record) in enumerate(numbered):
        where = f"line {line}" if line is not None else f"table_stats[{n}]"
        try:
            row, reasons = conform_row("table_stats", _stats_row(item.path, record, line))
        except IngestError as exc:
            issues.append(IngestIssue(exc.path, exc.reason, exc.line))
            continue
        except Exception as exc:  # one snapshot's surprise, not the file's
            issues.append(_issue(item.path, f"{where} skipped: {_why(exc)}", line=line))
            continue
        rows.append(row)
        issues += [_issue(item.path, f"{where}: {r}", line=line) for r in reasons]
    return rows, issues


def _stats_row(path: Path, record: Any, line: int | None) -> Json:
    """One snapshot; ``as_of`` is ISO-8601 or epoch ms.

    Raises:
        IngestError: no table name, no or unreadable as_of, or a non-numeric count.
    """
    rec = _dict(record)
    table = rec.get("table") or rec.get("table_name")
    as_of = _as_of(rec.get("as_of"))
    if not table or as_of is None:
        raise IngestError(str(path), "table stats need a table and an as_of time", line)
    row: Json = {"table_name": str(table), "as_of": as_of, "source": SOURCE}
    for column, keys in (("bytes", ("bytes",)), ("row_count", ("rows", "row_count"))):
        row[column] = _count(path, next((rec[k] for k in keys if k in rec), None), line)
    for column in ("files", "partitions"):
        row[column] = _count(path, rec.get(column), line)
    return row


def _as_of(value: Any) -> datetime | None:
    """
    >>> _as_of("2024-02-13T06:00:00Z"), _as_of(1707804000000)
    (datetime.datetime(2024, 2, 13, 6, 0), datetime.datetime(2024, 2, 13, 6, 0))
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _ts(_ms(value))
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _count(path: Path, value: Any, line: int | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise IngestError(str(path), f"not a number: {shown(value)}", line) from exc


# --------------------------------------------------------------------------- per-file output


@dataclass
class _Output:
    """What one input file contributes: rows per table and issues."""

    rows: dict[str, list[Json]] = field(default_factory=dict)
    issues: list[IngestIssue] = field(default_factory=list)

    def add(self, rows: Mapping[str, Sequence[Json]]) -> None:
        for name, batch in rows.items():
            self.rows.setdefault(name, []).extend(batch)


def _output(item: _Input, cat: _Catalog) -> _Output:
    out = _Output(issues=[item.problem] if item.problem else [])
    out.issues += cat.issues.get(item.path, [])
    if item.problem is not None:
        return out
    try:
        _fill(out, item, cat)
    except IngestError as exc:
        out.issues.append(IngestIssue(exc.path, exc.reason, exc.line))
    return out


def _fill(out: _Output, item: _Input, cat: _Catalog) -> None:
    """Rows of the objects this file owns (the file whose version of them won the merge)."""
    if item.kind in _ID_KEYS:
        for record in cat.owned(item.kind, item.path):
            _add_record(out, item, record.data, cat)
    elif item.kind == "table_stats":
        stats, issues = _stats_rows(item)
        out.add({"table_stats": stats})
        out.issues += issues


_RECORD_NAMES = {"jobs": "job", "runs": "run", "clusters": "cluster"}


def _add_record(out: _Output, item: _Input, data: Json, cat: _Catalog) -> None:
    """One job, run or cluster's rows, or an issue naming it: the file's other records go on.

    A value its column cannot hold is stored as NULL, with an issue naming the record and
    the column.
    """
    key = _text(data.get(_ID_KEYS[item.kind])) or ""
    name = f"{_RECORD_NAMES[item.kind]} {key if len(key) <= 40 else shown(key)}"
    try:
        rows, issues = _derive(item.kind, data, cat, item.path)
        fixed: dict[str, list[Json]] = {}
        for table_name, batch in rows.items():
            for row in batch:
                good, reasons = conform_row(table_name, row)
                fixed.setdefault(table_name, []).append(good)
                issues += [_issue(item.path, f"{name}: {r}") for r in reasons]
    except Exception as exc:  # a record the code did not foresee: skipped, and said so
        out.issues.append(_issue(item.path, f"{name} skipped: {_why(exc)}"))
        return
    out.add(fixed)
    out.issues += issues


def _derive(
    kind: str, data: Json, cat: _Catalog, path: Path
) -> tuple[dict[str, list[Json]], list[IngestIssue]]:
    if kind == "clusters":
        return {"cluster_configs": [_config_row(data, cat)]}, []
    return (_job_rows if kind == "jobs" else _run_rows)(data, cat, path)


def _why(exc: Exception) -> str:
    """An unforeseen failure as the report shows it (our own errors say it themselves)."""
    if isinstance(exc, IngestError):
        return exc.reason
    if isinstance(exc, UnstorableKey):
        return str(exc)
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else f"{text[:200]}…"  # an OSError quotes its whole path


def _fingerprint(item: _Input, out: _Output) -> str:
    """Ledger identity: the file's bytes plus everything derived from it (see module doc)."""
    derived = json.dumps([out.rows, [i.as_dict() for i in out.issues]], sort_keys=True, default=str)
    return hash_bytes(item.data, b"\0", derived.encode())


_WRITE_ORDER = ("cluster_configs", "jobs", "runs", "run_attributes", "table_stats")


@dataclass(frozen=True)
class _Pending:
    """A changed file's rows, waiting for its batch's transaction."""

    item: _Input
    out: _Output
    key: str


def _store_batch(
    con: duckdb.DuckDBPyConnection, batch: Sequence[_Pending]
) -> tuple[list[_Pending], list[IngestIssue]]:
    """Write a batch of files in one transaction, or file by file when the batch is refused.

    Each run and job is owned by one file, and a later file's row replaces an earlier one's
    with the same key, so one upsert per table gives the rows file-by-file writes give.

    Returns:
        The files stored, and one fatal issue per file the warehouse refused (nothing of it
        is kept, nor its ledger entry: fixed, it is ingested by the next run).
    """
    try:
        _commit(con, batch, f"{len(batch)} workspace files")
        return list(batch), []
    except WarehouseError:
        pass
    stored, refused = [], []
    for p in batch:
        try:
            _commit(con, [p], str(p.item.path))
            stored.append(p)
        except WarehouseError as exc:
            refused.append(IngestIssue(str(p.item.path), str(exc), fatal=True))
    return stored, refused


def _commit(con: duckdb.DuckDBPyConnection, batch: Sequence[_Pending], what: str) -> None:
    """The rows, issues and ledger entries of ``batch`` in one transaction (rolled back whole)."""
    with transaction(con, what):
        _write(con, batch)
        record_ingested_many(con, [(p.key, p.item.path) for p in batch], LEDGER_KIND)


def _write(con: duckdb.DuckDBPyConnection, batch: Sequence[_Pending]) -> None:
    """The rows and issues of ``batch``, inside the caller's transaction."""
    run_ids = [row["run_id"] for p in batch for row in p.out.rows.get("runs", [])]
    if run_ids:
        con.execute(
            f"DELETE FROM run_attributes WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
            f"AND (name IN {_ATTRIBUTES!r} OR starts_with(name, '{TAG_PREFIX}'))",
            [run_ids],
        )
    for name in _WRITE_ORDER:
        rows = [row for p in batch for row in p.out.rows.get(name, [])]
        insert_rows(con, name, _last_per_key(name, rows), replace=True)
    record_issues(con, [issue for p in batch for issue in p.out.issues])


def _last_per_key(name: str, rows: Sequence[Json]) -> list[Json]:
    """The last row per primary key, as successive upserts would leave it.

    One file may define the same cluster config twice, and a batch holds many files.
    """
    key = table(name).primary_key
    return list({tuple(r.get(k) for k in key): r for r in rows}.values())


# --------------------------------------------------------------------------- event logs


def event_log_paths(root: Path) -> list[Path]:
    """Event logs of a workspace: each cluster-log-delivery leaf folder, and ``eventlogs/*``.

    Cluster log delivery writes ``<cluster_id>/eventlog/<cluster_id>_<ip>/<context_id>/`` with
    ``eventlog`` plus rolled ``eventlog-<time>.gz`` parts: one application, so the folder is
    passed as one rolled log.
    """
    leaves: set[Path] = set()
    delivery = root / "cluster-logs"
    if delivery.is_dir():
        for f in delivery.rglob("eventlog*"):
            if f.is_file() and "eventlog" in f.relative_to(delivery).parts[:-1]:
                leaves.add(f.parent)
    plain = root / "eventlogs"
    if plain.is_dir():
        leaves.update(p for p in plain.iterdir() if not p.name.startswith("."))
    return sorted(leaves)


def delivery_location(path: Path) -> tuple[str, str | None] | None:
    """(cluster_id, spark_context_id) from a cluster-log-delivery path, if it is one.

    >>> delivery_location(Path("logs/0207-a/eventlog/0207-a_10_1_2_3/8880/eventlog-1.gz"))
    ('0207-a', '8880')
    >>> delivery_location(Path("eventlogs/app-1")) is None
    True
    """
    parts = path.parts
    for i in range(1, len(parts) - 1):
        cluster = parts[i - 1]
        if parts[i] == "eventlog" and parts[i + 1].startswith(cluster + "_"):
            return cluster, parts[i + 2] if i + 2 < len(parts) else None
    return None


@dataclass(frozen=True)
class _Unit:
    """A run, or one task run of it, as it ran on a cluster; ``run_id`` is the runs row."""

    run_id: str
    unit_id: str
    cluster_id: str | None
    context_id: str | None
    start_ms: int | None
    end_ms: int | None


def _units(run_id: str, run: Json) -> Iterator[_Unit]:
    for holder in (run, *_dicts(run.get("tasks"))):
        instance = _dict(holder.get("cluster_instance"))
        yield _Unit(
            run_id,
            _text(holder.get("run_id")) or run_id,
            _text(instance.get("cluster_id")),
            _text(instance.get("spark_context_id")),
            _ms(holder.get("start_time")),
            _ms(holder.get("end_time")),
        )


@dataclass(frozen=True)
class RunLinker:
    """Links an application to a workspace run by the rules of ``docs/workspace.md``.

    A plain picklable object (not a closure), so a distributed ingest can ship it to the
    processes that parse the logs. Indexed by unit id and cluster, so linking an application
    is a lookup, not a scan of every run (which made ingest quadratic in the workspace's size).
    """

    units: tuple[_Unit, ...]
    by_unit_id: dict[str, str] = field(init=False, repr=False, compare=False)
    by_cluster: dict[str | None, tuple[_Unit, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids: dict[str, str] = {}
        clusters: dict[str | None, list[_Unit]] = {}
        for unit in self.units:
            ids.setdefault(unit.unit_id, unit.run_id)  # the first unit of an id, as a scan finds
            clusters.setdefault(unit.cluster_id, []).append(unit)
        object.__setattr__(self, "by_unit_id", ids)
        object.__setattr__(self, "by_cluster", {k: tuple(v) for k, v in clusters.items()})

    def __call__(self, facts: AppFacts) -> str | None:
        return (
            _by_run_id(self.by_unit_id, facts)
            or _by_location(self.by_cluster, facts)
            or _by_overlap(self.by_cluster, facts)
        )


def make_linker(runs: Mapping[str, Json]) -> RunLinker:
    """A linker over the workspace's runs, applying the rules of ``docs/workspace.md``.

    1. ``spark.databricks.job.runId`` (or ``parentRunId``) equal to a run's or task run's id;
    2. the log's delivery folder ``<cluster_id>/eventlog/<cluster_id>_<ip>/<context_id>``
       equal to a run's ``cluster_instance``;
    3. the cluster id (property or folder) and the run's [start_time, end_time] overlapping
       the application's.

    Task runs resolve to their parent run (the runs row). When several runs fit rule 2 or 3,
    the one overlapping the application most wins; a tie links nothing rather than guessing.
    """
    return RunLinker(tuple(u for run_id, run in runs.items() for u in _units(run_id, run)))


def _by_run_id(by_unit_id: Mapping[str, str], facts: AppFacts) -> str | None:
    for prop in (RUN_ID_PROP, PARENT_RUN_ID_PROP):
        wanted = facts.properties.get(prop)
        if wanted and (hit := by_unit_id.get(wanted)):
            return hit
    return None


def _by_location(by_cluster: Mapping[str | None, Sequence[_Unit]], facts: AppFacts) -> str | None:
    where = delivery_location(facts.path)
    if where is None or where[1] is None:
        return None
    hits = [u for u in by_cluster.get(where[0], ()) if u.context_id == where[1]]
    if len({u.run_id for u in hits}) == 1:
        return hits[0].run_id
    return _most_overlap(hits, facts)


def _by_overlap(by_cluster: Mapping[str | None, Sequence[_Unit]], facts: AppFacts) -> str | None:
    where = delivery_location(facts.path)
    cluster = facts.properties.get(CLUSTER_ID_PROP) or (where[0] if where else None)
    if not cluster:
        return None
    return _most_overlap(by_cluster.get(cluster, ()), facts)


def _most_overlap(units: Sequence[_Unit], facts: AppFacts) -> str | None:
    """The run overlapping the application longest (an app without end counts as a point)."""
    if facts.start_ms is None:
        return None
    app_end = facts.end_ms if facts.end_ms is not None else facts.start_ms
    best: dict[str, int] = {}
    for u in units:
        if u.start_ms is None:
            continue
        unit_end = u.end_ms if u.end_ms is not None else app_end
        overlap = min(app_end, unit_end) - max(facts.start_ms, u.start_ms)
        if overlap >= 0:
            best[u.run_id] = max(overlap, best.get(u.run_id, overlap))
    ranked = sorted(best.items(), key=lambda kv: -kv[1])
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


# --------------------------------------------------------------------------- entry point


BATCH_FILES = 500


def _pending(item: _Input, cat: _Catalog) -> _Pending:
    out = _output(item, cat)
    return _Pending(item, out, _fingerprint(item, out))


def _ingest_batch(
    con: duckdb.DuckDBPyConnection, items: Sequence[_Input], cat: _Catalog, report: IngestReport
) -> None:
    """Store the changed files among ``items`` (unchanged ones count as such) and report them."""
    pending = [_pending(item, cat) for item in items]
    known = ingested_among(con, [p.key for p in pending])
    changed: dict[str, _Pending] = {}
    for p in pending:
        if p.key in known or p.key in changed:  # a second identical file, as a re-ingest
            report.files_unchanged += 1
        else:
            changed[p.key] = p
    stored, refused = _store_batch(con, list(changed.values())) if changed else ([], [])
    for p in stored:
        report.files_ingested += 1
        report.runs += len(p.out.rows.get("runs", []))
        report.issues.extend(p.out.issues)
    if refused:
        report.issues.extend(refused)
        record_issues(con, refused)


def ingest_workspace(
    con: duckdb.DuckDBPyConnection, root: Path, report: IngestReport, ingest_logs: IngestLogs
) -> None:
    """Ingest a workspace export, then hand its event logs to ``ingest_logs`` with a linker.

    Bad input (unparseable JSON, a run without run_id, a run naming an unknown cluster, a
    value of the wrong type, a file the warehouse refuses, a FIFO named like a file) becomes an
    issue in ``report.issues`` and in ``ingest_issues``; the rest is ingested.

    Raises:
        WarehouseError: the warehouse cannot record the issues (it is unusable).
    """
    inputs = [_read_input(p, k) for k in _JSON_KINDS for p in _input_paths(root, k)]
    cat = _catalog(root, inputs)
    for start in range(0, len(inputs), BATCH_FILES):
        _ingest_batch(con, inputs[start : start + BATCH_FILES], cat, report)
    log.info("workspace %s: %d jobs, %d runs", root, len(cat.jobs), len(cat.runs))
    paths = event_log_paths(root)
    if paths:
        ingest_logs(paths, make_linker({k: r.data for k, r in cat.runs.items()}))
