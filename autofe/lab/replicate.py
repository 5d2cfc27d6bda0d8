"""Replicate a lab workspace N times: one bigger organisation's history built from one team's.

The scale benchmark (``benchmarks/scale.py``) needs workspaces 10× and 100× the shipped one
with the same shape of data. Copy ``k`` of the source is another team running the same
pipelines over the same month: its runs, jobs, clusters, Spark contexts and applications get
ids of their own, so every copy is a distinct history — the warehouse keys on them, and ingest
skips any input whose bytes it has already stored, so every copied file must differ in
content. What an organisation shares stays shared: the scripts the jobs run, the tables they
read (``table_stats``), the node types, and so the cluster configurations (their ids are
derived from their content). Times are not shifted: the copies run concurrently, so each
job's history keeps its length and the organisation has N times as many jobs and runs.

Ids of copy ``k`` (copy 0 is the source, file for file):

- run ids ``r + k·S`` and job ids ``j + k·T`` (``S``, ``T``: the powers of ten above the
  largest run and job id), so a run id still tells its copy and its original;
- cluster ids and application ids with a ``-c<k>`` suffix, Spark context ids ``+ k``;
- job names (and run names, and the Spark application names built from them) ``_c<k>``.

Event logs are zstd-compressed JSON lines: each is decompressed once, its ids are replaced
as exact byte strings (:func:`log_tokens`) for every copy, and each copy is compressed again
at the level Spark writes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import zstandard

from autofe.errors import ConfigError

MANIFEST = "replica.json"
SHARED = ("node_types.json", "scripts", "table_stats")
"""What every copy shares, copied once: node types, the jobs' scripts, the tables' statistics."""
ZSTD_LEVEL = 3
"""The level Spark's zstd codec writes (the lab's logs recompress to their original size)."""

_RUN_KEYS = frozenset({"run_id", "original_attempt_run_id", "parent_run_id"})
_CLUSTER_KEYS = frozenset({"cluster_id", "existing_cluster_id"})
_APP_ID = re.compile(rb'"(?:App ID|spark\.app\.id)":"([^"]+)"')


@dataclass(frozen=True)
class ReplicaReport:
    """What a replica holds and what building it took."""

    out: Path
    source: Path
    copies: int
    first: int
    runs: int
    jobs: int
    event_logs: int
    bytes: int
    run_stride: int
    job_stride: int
    seconds: float


@dataclass(frozen=True)
class CopyIds:
    """The id mapping of one copy; copy 0 maps every id to itself."""

    copy: int
    run_stride: int
    job_stride: int

    def run(self, value: Any) -> Any:
        """
        >>> CopyIds(2, 10_000, 1_000).run(1001), CopyIds(2, 10_000, 1_000).run("1001")
        (21001, '21001')
        """
        return _offset(value, self.copy * self.run_stride)

    def job(self, value: Any) -> Any:
        return _offset(value, self.copy * self.job_stride)

    def context(self, value: Any) -> Any:
        return _offset(value, self.copy)

    def suffixed(self, value: str, sep: str = "-") -> str:
        """A cluster or application id (``-c<k>``) or a name (``_c<k>``) of this copy.

        >>> CopyIds(3, 10, 10).suffixed("0301-000003-4887e1a0"), CopyIds(0, 10, 10).suffixed("x")
        ('0301-000003-4887e1a0-c3', 'x')
        """
        return f"{value}{sep}c{self.copy}" if self.copy else value

    def name(self, value: str) -> str:
        return self.suffixed(value, "_")


def _offset(value: Any, by: int) -> Any:
    """An integer id (or its decimal text) moved by ``by``, keeping its type.

    Raises:
        ConfigError: the id is not an integer (replicas offset numeric ids only).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value + by
    if isinstance(value, str) and value.isdigit():
        return str(int(value) + by)
    raise ConfigError(f"cannot replicate a workspace with the non-numeric id {value!r}")


def stride(ids: Iterable[Any]) -> int:
    """The power of ten above every id: ``id + k·stride`` never meets another copy's id.

    >>> stride([101, 125]), stride([1001, 1499]), stride([9])
    (1000, 10000, 10)
    """
    digits = len(str(max((int(i) for i in ids), default=0)))
    return int(10**digits)


# --------------------------------------------------------------------------- JSON records


def rewrite_ids(obj: Any, ids: CopyIds) -> Any:
    """A Jobs API object (run, cluster, job) with its ids, at any depth, mapped to copy ``ids``.

    >>> rewrite_ids({"run_id": 7, "cluster_instance": {"cluster_id": "c", "spark_context_id": 5},
    ...              "job_id": 3, "run_name": "etl"}, CopyIds(1, 10, 10))
    {'run_id': 17, 'cluster_instance': {'cluster_id': 'c-c1', 'spark_context_id': 6}, \
'job_id': 13, 'run_name': 'etl_c1'}
    """
    if isinstance(obj, list):
        return [rewrite_ids(item, ids) for item in obj]
    if not isinstance(obj, dict):
        return obj
    return {key: _rewrite_value(key, value, ids) for key, value in obj.items()}


def _rewrite_value(key: str, value: Any, ids: CopyIds) -> Any:
    if value is None:
        return None
    if key in _RUN_KEYS:
        return ids.run(value)
    if key == "job_id":
        return ids.job(value)
    if key in _CLUSTER_KEYS:
        return ids.suffixed(str(value))
    if key == "spark_context_id":
        return ids.context(value)
    if key in ("run_name", "cluster_name"):
        return ids.name(str(value))
    if key == "settings" and isinstance(value, dict) and "name" in value:
        return {**rewrite_ids(value, ids), "name": ids.name(str(value["name"]))}
    return rewrite_ids(value, ids)


# --------------------------------------------------------------------------- event logs


@dataclass(frozen=True)
class LogRun:
    """A run whose application logged into a folder: the ids its log carries."""

    run_id: int
    run_name: str | None


@dataclass(frozen=True)
class LogFile:
    """One event-log file under ``cluster-logs/<cluster>/eventlog/<cluster>_<ip>/<context>/``."""

    rel: str
    cluster: str
    context: str | None
    runs: tuple[LogRun, ...]


def log_tokens(log: LogFile, app_ids: Iterable[str], ids: CopyIds) -> dict[bytes, bytes]:
    """Exact byte strings of ``log``'s ids and what copy ``ids`` writes instead.

    Identity ids (cluster, context, application: long and unique) are replaced wherever they
    occur. A run id is a short number, so it is replaced only in the contexts the log writes
    it, each with the character that ends it: the ``runId`` / ``parentRunId`` properties (JSON
    and command line), the application name ``<run name>-<run id>``, and the lab's per-run
    output folder ``/scratch/<run id>/`` (visible in query plans).

    >>> log = LogFile("x", "0301-a", "77", (LogRun(1001, "etl"),))
    >>> tokens = log_tokens(log, ["local-5"], CopyIds(1, 10_000, 1_000))
    >>> tokens[b"0301-a"], tokens[b'runId":"1001"'], tokens[b"etl-1001 "]
    (b'0301-a-c1', b'runId":"11001"', b'etl_c1-11001 ')
    """
    pairs = {log.cluster: ids.suffixed(log.cluster)}
    if log.context is not None:
        pairs[log.context] = str(ids.context(log.context))
    pairs.update({app: ids.suffixed(app) for app in app_ids})
    for run in log.runs:
        old, new = str(run.run_id), str(ids.run(run.run_id))
        for end in ('"', " "):
            for key in ("runId", "RunId"):
                pairs[f'{key}":"{old}{end}'] = f'{key}":"{new}{end}'
                pairs[f"{key}={old}{end}"] = f"{key}={new}{end}"
            if run.run_name:
                pairs[f"{run.run_name}-{old}{end}"] = f"{ids.name(run.run_name)}-{new}{end}"
        pairs[f"/scratch/{old}/"] = f"/scratch/{new}/"
    return {old.encode(): new.encode() for old, new in pairs.items()}


def replace_tokens(data: bytes, tokens: Mapping[bytes, bytes]) -> bytes:
    """``data`` with every token replaced, longest first.

    Sequential ``bytes.replace`` is several times faster than one regular expression over
    the alternatives; it is exact here because no replacement contains a token replaced after
    it (a new id contains only its own old id, already replaced).

    >>> replace_tokens(b'"a":"c1","b":"c12"', {b'"c1"': b'"c1-c2"'})
    b'"a":"c1-c2","b":"c12"'
    """
    for old in sorted(tokens, key=len, reverse=True):
        data = data.replace(old, tokens[old])
    return data


def _replicate_log(src: Path, out: Path, log: LogFile, all_ids: Sequence[CopyIds]) -> None:
    """Write every copy of one event log (decompressed once)."""
    source = src / log.rel
    data: bytes | None = None
    for ids in all_ids:
        if ids.copy == 0:
            target = out / log.rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            continue
        if data is None:
            with source.open("rb") as handle:
                data = zstandard.ZstdDecompressor().stream_reader(handle).read()
        apps = sorted({m.group(1).decode() for m in _APP_ID.finditer(data)})
        tokens = log_tokens(log, apps, ids)
        content = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(replace_tokens(data, tokens))
        target = out / _rewrite_path(log.rel, ids, log)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def _rewrite_path(rel: str, ids: CopyIds, log: LogFile) -> str:
    """``rel`` with the cluster and context ids in its folder names replaced.

    >>> log = LogFile("cluster-logs/c/eventlog/c_10_1/7/e.zstd", "c", "7", ())
    >>> _rewrite_path(log.rel, CopyIds(1, 10, 10), log)
    'cluster-logs/c-c1/eventlog/c-c1_10_1/8/e.zstd'
    """
    cluster = ids.suffixed(log.cluster)
    parts = rel.split("/")
    parts[1] = cluster
    if len(parts) > 4 and parts[2] == "eventlog" and parts[3].startswith(log.cluster):
        parts[3] = cluster + parts[3][len(log.cluster) :]
        if log.context is not None:
            parts[4] = str(ids.context(log.context))
    return "/".join(parts)


def _log_files(root: Path, runs: Sequence[Mapping[str, Any]]) -> list[LogFile]:
    """Every file of cluster log delivery, with the runs that ran in its Spark context."""
    by_place: dict[tuple[str, str], list[LogRun]] = {}
    for run in runs:
        instance = run.get("cluster_instance") or {}
        place = (str(instance.get("cluster_id")), str(instance.get("spark_context_id")))
        by_place.setdefault(place, []).append(LogRun(int(run["run_id"]), run.get("run_name")))
    delivery = root / "cluster-logs"
    files = sorted(p for p in delivery.rglob("*") if p.is_file()) if delivery.is_dir() else []
    logs = []
    for path in files:
        parts = path.relative_to(delivery).parts
        cluster = parts[0]
        context = parts[3] if len(parts) > 4 and parts[1] == "eventlog" else None
        found = by_place.get((cluster, str(context)), [])
        logs.append(LogFile(path.relative_to(root).as_posix(), cluster, context, tuple(found)))
    return logs


# --------------------------------------------------------------------------- the workspace


Records = list[tuple[Path, dict[str, Any]]]


@dataclass(frozen=True)
class _Source:
    """The per-run inputs of a lab workspace, read once: each file with its content."""

    jobs: list[dict[str, Any]]
    runs: Records
    clusters: Records


def _read_source(src: Path) -> _Source:
    """Jobs, runs and clusters of ``src``.

    Raises:
        ConfigError: ``src`` is not laid out like a lab workspace, or has bare event logs.
    """
    jobs_file = src / "jobs" / "list.json"
    if not jobs_file.is_file() or not (src / "runs").is_dir():
        raise ConfigError(f"{src} is not a lab workspace (no jobs/list.json and runs/)")
    if (src / "eventlogs").exists():
        raise ConfigError(f"{src}/eventlogs: bare event logs have no run to replicate with")
    return _Source(
        jobs=list(_read_json(jobs_file).get("jobs", [])),
        runs=[(p, _read_json(p)) for p in sorted((src / "runs").glob("*.json"))],
        clusters=[(p, _read_json(p)) for p in sorted((src / "clusters").glob("*.json"))],
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc


def _write_json(path: Path, content: Any) -> None:
    path.write_text(json.dumps(content, separators=(",", ":")), encoding="utf-8")


def _write_records(out: Path, source: _Source, ids: CopyIds) -> None:
    """Runs and clusters of one copy, each file named by its new id; copy 0's are copied."""
    for folder, records, key in (("runs", source.runs, "run_id"),
                                 ("clusters", source.clusters, "cluster_id")):  # fmt: skip
        (out / folder).mkdir(exist_ok=True)
        for path, record in records:
            if ids.copy == 0:
                shutil.copyfile(path, out / folder / path.name)
                continue
            copied = rewrite_ids(record, ids)
            _write_json(out / folder / f"{copied[key]}.json", copied)


def _copy_shared(src: Path, out: Path) -> None:
    for name in SHARED:
        if (src / name).is_dir():
            shutil.copytree(src / name, out / name, ignore=shutil.ignore_patterns(".*"))
        elif (src / name).is_file():
            shutil.copyfile(src / name, out / name)


def _pool(workers: int) -> ProcessPoolExecutor:
    """Worker processes from a forkserver that imported only this module (no DuckDB threads)."""
    context = get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return ProcessPoolExecutor(max_workers=workers, mp_context=context)


def _replicate_logs(
    src: Path, out: Path, logs: Sequence[LogFile], all_ids: Sequence[CopyIds], workers: int
) -> None:
    if workers <= 1:
        for log in logs:
            _replicate_log(src, out, log, all_ids)
        return
    with _pool(workers) as pool:
        for future in [pool.submit(_replicate_log, src, out, log, all_ids) for log in logs]:
            future.result()


def replicate_workspace(
    src: Path, out: Path, copies: int, workers: int = 1, first: int = 0
) -> ReplicaReport:
    """Write ``copies`` distinct copies of the lab workspace ``src`` as one workspace ``out``.

    Copies ``first`` … ``first + copies - 1``: replicas with disjoint ranges are parts of one
    organisation (copy 0, the source itself, belongs to the part that starts at 0). Built in
    ``<out>.partial`` and renamed when complete, so an existing ``out`` is whole (its
    ``replica.json`` says what it holds). ``workers`` processes rewrite the event logs.

    Raises:
        ConfigError: ``copies`` < 1, ``first`` < 0, ``out`` exists, or ``src`` is not a lab
            workspace.
    """
    if copies < 1 or first < 0:
        raise ConfigError(f"copies must be at least 1 and first at least 0, got {copies}, {first}")
    if out.exists():
        raise ConfigError(f"{out} exists; give a new folder for the replica")
    started = time.perf_counter()
    source = _read_source(src)
    runs = [run for _, run in source.runs]
    run_ids = [r[k] for r in runs for k in _RUN_KEYS if r.get(k) is not None]
    strides = stride(run_ids), stride(j["job_id"] for j in source.jobs)
    all_ids = [CopyIds(k, *strides) for k in range(first, first + copies)]
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # an interrupted build of this same replica
    partial.mkdir(parents=True)
    _copy_shared(src, partial)
    (partial / "jobs").mkdir()
    jobs = [rewrite_ids(job, ids) for ids in all_ids for job in source.jobs]
    _write_json(partial / "jobs" / "list.json", {"jobs": jobs})
    for ids in all_ids:
        _write_records(partial, source, ids)
    logs = _log_files(src, runs)
    _replicate_logs(src, partial, logs, all_ids, workers)
    report = ReplicaReport(
        out, src, copies, first, len(source.runs) * copies, len(jobs), len(logs) * copies,
        _disk_bytes(partial), *strides, round(time.perf_counter() - started, 3),
    )  # fmt: skip
    _write_json(partial / MANIFEST, {**asdict(report), "out": str(out), "source": str(src)})
    partial.rename(out)
    return report


def read_replica(out: Path) -> ReplicaReport | None:
    """The report of the complete replica at ``out``, or None if there is none."""
    path = out / MANIFEST
    if not path.is_file():
        return None
    data = _read_json(path)
    paths = {"out": Path(data["out"]), "source": Path(data["source"])}
    return ReplicaReport(**{"first": 0, **data, **paths})


def _disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in _files(root))


def _files(root: Path) -> Iterator[Path]:
    for folder, _, names in os.walk(root):
        yield from (Path(folder) / n for n in names)
