"""Scale: ingest and feature materialisation, DuckDB vs Spark, on 1×, 10×, 100× the example.

Run: ``.venv/bin/python benchmarks/scale.py [--copies 1,10,100] [--engines duckdb,spark]
[--steps ingest,features] [--timeout 1500] [--feature-timeout 600] [--duckdb-memory 1GB]
[--scratch /work/scratch/scale] [--write docs/results.md] [--render-only]``

The timed code is whatever ``autofe`` the interpreter imports: on a shared working tree, run
it from a clean ``git worktree`` with ``PYTHONPATH`` set to it (the venv's editable install
points at the main checkout; ``PYTHONPATH`` comes first). Each result records the commit,
``+dirty`` if tracked files differed from it.

Workspaces: ``autofe lab replicate`` of the shipped example (490 runs) into
``SCRATCH/x<N>`` (reused when present): N teams running the same pipelines over the same
month (``docs/spark.md``, Scale). Feature catalog: ``tests/fixtures/catalogs/ex8`` (the 132
accepted features of a real ``autofe run``).

Every measurement runs in a fresh subprocess, started in its own session, so nothing is
warm and a timeout (``--timeout``, per measurement) kills the whole process tree. Before each,
the script waits up to ``--settle-max`` s for the 1-minute load average to fall below
``--settle-load``, and records it before and after. Time is the parent's wall clock around the
subprocess (interpreter and JVM start-up included: a user pays them). Memory: the process
tree's resident set (the subprocess and every descendant: DuckDB, parser workers, Spark's
JVM) summed and sampled every 0.25 s, and the largest single process's peak: the largest
``VmHWM`` (the kernel's high-water mark) seen in the tree, or ``ru_maxrss`` from ``wait4``
(processes the subprocess waited for) if larger.

- DuckDB ingest: ``autofe ingest --workers 2`` into a fresh warehouse file.
- Spark ingest: ``autofe ingest --engine spark --master local[2]`` into a fresh Parquet folder
  (``autofe.pipelines.spark.spark_ingest``).
- DuckDB features: what ``autofe.modeling.compute.feature_matrix`` does (``feature_values``
  per feature through the read-only sandbox, the labelled runs, ``build_dataset``) on that
  warehouse, with the sandbox's production limits for a batch (1 GB, 2 threads, spilling up
  to ``BATCH_MAX_SPILL`` into ``SCRATCH/x<N>.spill``, as ``autofe run`` computes its final
  catalog; ``--duckdb-memory`` to try another memory limit, reported as its own engine) except
  the per-query timeout (``--feature-timeout``) and the row cap. A feature the sandbox refuses
  (memory, timeout) is counted and the rest go on; each feature's time is logged as it
  finishes, so a stopped run still says how far it got.
- Spark features: what ``autofe features materialize --engine spark`` does after the gates:
  one ``materialize_on_spark`` call for the whole catalog (its features run together, a few
  Spark jobs, values staged as Parquet by the executors) and ``write_spark_features`` into a
  fresh store ``SCRATCH/x<N>.spark-features.duckdb``. Features it refuses (no faithful Spark
  SQL, Spark cannot plan them, they fail) are counted. The features run together, so there is
  no time per feature: the progress file has each one's status and translation-and-planning
  time, and the phases (``batches``, ``counts``, ``store``), which the results' status column
  shows; the batches' progress is logged to stderr (the last line is kept when a run stops).

``--replica warehouse`` (for 100 k and 1 M runs, where parsing event logs would take hours):
the sizes are ``autofe warehouse replicate`` copies of the example's warehouse
(``SCRATCH/x1.duckdb``, ingested once), built untimed into ``SCRATCH/x<N>.duckdb`` unless
there; only the features step is measured (Spark's on those warehouses exported to Parquet).

Results accumulate in ``SCRATCH/results.json`` (one entry per engine, step and size, with its
commit, command and load average), so sizes can be measured in separate invocations; ``--write``
renders all of them into the ``scale`` section of a results file.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from report import machine, write_section

from autofe.config import example_workspace
from autofe.lab.replicate import read_replica, replicate_workspace
from autofe.sandbox.limits import SandboxLimits

REPO = Path(__file__).resolve().parents[1]
PYTHON = Path(sys.executable)
AUTOFE = PYTHON.parent / "autofe"
CATALOG = REPO / "tests" / "fixtures" / "catalogs" / "ex8"
SAMPLE_S = 0.25
POLL_S = 0.05
DEFAULT_MEMORY = SandboxLimits().memory_limit
PRODUCTION_TIMEOUT_S = SandboxLimits().timeout_s
"""The sandbox's default per-query timeout: a feature slower than this fails in production."""


# --------------------------------------------------------------------------- process trees


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/<pid>/stat``."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_rss(root: int) -> tuple[int, int]:
    """Resident bytes of ``root`` and all its descendants now, and the largest peak among them
    (``VmHWM``: the kernel's high-water mark, exact however briefly the peak lasted)."""
    tree, todo, total, high = _children(), [root], 0, 0
    while todo:
        pid = todo.pop()
        todo.extend(tree.get(pid, []))
        status = _status_kib(pid)
        total += status.get("VmRSS", 0) * 1024
        high = max(high, status.get("VmHWM", 0) * 1024)
    return total, high


def _status_kib(pid: int) -> dict[str, int]:
    """The ``kB`` fields of ``/proc/<pid>/status`` (empty once the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    fields = (line.split() for line in lines if line.endswith(" kB"))
    return {f[0].rstrip(":"): int(f[1]) for f in fields if len(f) == 3}


@dataclass
class Outcome:
    """How one subprocess ended and what it used."""

    seconds: float
    peak_tree_rss: int
    max_rss: int
    status: str
    stdout: str
    stderr: str


def run_measured(cmd: Sequence[str], timeout: float) -> Outcome:
    """Run ``cmd`` in a new session, sampling its tree's RSS; kill the tree after ``timeout``.

    ``wait4`` is polled every 50 ms (the exit is seen within that), the tree every 0.25 s.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )
        peak, high, killed, polls = 0, 0, False, 0
        while True:
            if polls % round(SAMPLE_S / POLL_S) == 0:
                now, hwm = tree_rss(proc.pid)
                peak, high = max(peak, now), max(high, hwm)
            pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if not killed and time.perf_counter() - started > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
            polls += 1
            time.sleep(POLL_S)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(code)  # reaped: Popen must not wait again
        _kill_leftovers(proc.pid)
        status = "timeout" if killed else "ok" if proc.returncode == 0 else "failed"
        out.seek(0)
        err.seek(0)
        largest = max(high, usage.ru_maxrss * 1024)
        return Outcome(round(seconds, 2), peak, largest, status, out.read(), err.read())


def _kill_leftovers(group: int) -> None:
    """Whatever the finished subprocess left running in its session (a stray JVM, say)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


# --------------------------------------------------------------------------- children


def child_duckdb_features(args: argparse.Namespace) -> None:
    """``feature_matrix`` with each feature timed into ``--progress`` as it finishes."""
    from autofe.errors import ModelError
    from autofe.feature_catalog import load_catalog
    from autofe.modeling.compute import feature_values
    from autofe.modeling.dataset import LABELLED_SQL, Value, as_labelled, build_dataset
    from autofe.sandbox.limits import spilling
    from autofe.sandbox.session import Sandbox

    specs = load_catalog(args.catalog)
    limits = SandboxLimits(
        memory_limit=args.duckdb_memory, timeout_s=args.feature_timeout, max_rows=10_000_000
    )
    values: dict[str, dict[str, Value]] = {}
    spill = args.db.with_suffix(".spill")
    with (
        spilling(limits, spill) as batch,
        Sandbox.open(args.db, batch) as sandbox,
        args.progress.open("w") as log,
    ):
        for spec in specs:
            started = time.perf_counter()
            try:
                values[spec.name] = feature_values(sandbox, spec)
                status = "ok"
            except ModelError as exc:
                status = "timeout" if "timeout" in str(exc) else f"failed: {exc}"
            seconds = round(time.perf_counter() - started, 3)
            log.write(json.dumps({"feature": spec.name, "seconds": seconds, "status": status}))
            log.write("\n")
            log.flush()
        runs = as_labelled(sandbox.query(LABELLED_SQL).rows)
    dataset = build_dataset(runs, values)
    print(json.dumps({"runs": len(runs), "features": len(values), "shape": list(dataset.x.shape)}))


def child_spark_features(args: argparse.Namespace) -> None:
    """The catalog computed by one ``materialize_on_spark`` call and stored in ``--store``;
    each feature's status and planning time, then the phases, to ``--progress``."""
    import logging

    from autofe.feature_catalog import load_catalog
    from autofe.pipelines.spark import SparkSettings, materialize_on_spark, write_spark_features

    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(message)s")
    logging.getLogger("autofe.pipelines.spark").setLevel(logging.INFO)  # each batch's job
    specs = load_catalog(args.catalog)
    settings = SparkSettings(master=args.master, conf=spark_conf(args.spark_conf))
    args.store.unlink(missing_ok=True)
    with materialize_on_spark(specs, args.tables, settings) as found:
        began = time.perf_counter()
        stored = write_spark_features(found, specs, args.store)
        store_s = round(time.perf_counter() - began, 3)
    refused = {r.name: f"refused at {r.stage}: {r.reason}" for r in found.refused}
    phases = {k: found.seconds[k] for k in ("batches", "counts", "total")} | {"store": store_s}
    with args.progress.open("w") as log:
        for spec in specs:
            status = refused.get(spec.name, "ok")
            row = {"feature": spec.name, "plan_seconds": found.seconds[spec.name], "status": status}
            log.write(json.dumps(row) + "\n")
        log.write(json.dumps({"phases": phases}) + "\n")
    print(json.dumps({"features": len(stored), "phases": phases}))


CHILDREN = {"duckdb-features": child_duckdb_features, "spark-features": child_spark_features}


# --------------------------------------------------------------------------- measurements


@dataclass
class Measurement:
    """One engine, step and size: what it cost and on what machine state."""

    engine: str
    step: str
    copies: int
    runs: int
    seconds: float
    peak_tree_rss: int
    max_rss: int
    status: str
    load_before: float
    load_after: float
    commit: str
    command: str
    when: str
    features_done: int | None = None
    features_total: int | None = None
    over_production_timeout: int | None = None
    slowest: list[tuple[str, float]] = field(default_factory=list)
    feature_seconds: dict[str, float] = field(default_factory=dict)
    detail: str = ""


def _commit() -> str:
    """The checkout's commit, ``+dirty`` if its tracked files differ from it."""
    git = ["git", "-C", str(REPO)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)  # fmt: skip
    return (head.stdout.strip() or "unknown") + ("+dirty" if dirty.stdout.strip() else "")


def settle(threshold: float, longest: float) -> None:
    """Wait (up to ``longest`` s) for the 1-minute load average to fall below ``threshold``."""
    waited = 0.0
    while os.getloadavg()[0] >= threshold and waited < longest:
        time.sleep(5)
        waited += 5


def ensure_replica(scratch: Path, copies: int) -> Path:
    """``SCRATCH/x<copies>``, built from the example workspace unless already complete."""
    out = scratch / f"x{copies}"
    if read_replica(out) is None:
        print(f"building {out} ...", flush=True)
        report = replicate_workspace(example_workspace(), out, copies, workers=2)
        print(f"  {report.runs} runs, {report.bytes / 1e9:.2f} GB in {report.seconds:.0f} s")
    return out


@dataclass(frozen=True)
class Plan:
    """What to run, from the command line."""

    scratch: Path
    catalog: Path
    timeout: float
    feature_timeout: float
    settle_load: float
    settle_max: float
    command: str
    steps: tuple[str, ...]
    duckdb_memory: str
    master: str
    tables_from_duckdb: bool
    spark_conf: tuple[str, ...] = ()
    replica: str = "workspace"


def ensure_warehouse_replica(scratch: Path, copies: int) -> Path:
    """``SCRATCH/x<copies>.duckdb``: ``autofe warehouse replicate`` of the example's warehouse
    (``SCRATCH/x1.duckdb``, ingested once), unless already there."""
    from autofe.config import IngestSettings
    from autofe.ingest.ingest import ingest
    from autofe.warehouse.replicate import replicate_warehouse

    one = scratch / "x1.duckdb"
    if not one.is_file():
        ingest([example_workspace()], IngestSettings(db=one, workers=2))
    out = scratch / f"x{copies}.duckdb"
    if not out.is_file():
        print(f"building {out} ...", flush=True)
        report = replicate_warehouse(one, out, copies)
        print(f"  {report.rows_after['runs']:,} runs in {report.seconds:.0f} s", flush=True)
    return out


def replica_runs(plan: Plan, copies: int) -> int:
    """Runs of the size measured: the workspace replica's manifest, or the warehouse's count."""
    if plan.replica == "warehouse":
        from autofe.warehouse.sample import count_runs

        return count_runs(plan.scratch / f"x{copies}.duckdb")
    replica = read_replica(plan.scratch / f"x{copies}")
    return replica.runs if replica else 0


def measure(plan: Plan, engine: str, step: str, copies: int, cmd: list[str]) -> Measurement:
    """Run one measurement subprocess after the machine settles; print and return it."""
    settle(plan.settle_load, plan.settle_max)
    load_before = os.getloadavg()[0]
    print(f"{engine} {step} {copies}x: {' '.join(cmd)}", flush=True)
    outcome = run_measured(cmd, plan.timeout)
    result = Measurement(
        engine, step, copies, replica_runs(plan, copies), outcome.seconds,
        outcome.peak_tree_rss, outcome.max_rss, outcome.status, load_before,
        os.getloadavg()[0], _commit(), plan.command, time.strftime("%Y-%m-%d %H:%M"),
    )  # fmt: skip
    if outcome.status != "ok":  # a failure's last line says why; a timeout's, how far it got
        result.detail = outcome.stderr.strip().splitlines()[-1][:300] if outcome.stderr else ""
    print(
        f"  {result.status}: {result.seconds:.1f} s, tree peak "
        f"{result.peak_tree_rss / 2**20:,.0f} MiB, largest process {result.max_rss / 2**20:,.0f} "
        f"MiB (load {load_before:.2f} -> {result.load_after:.2f})",
        flush=True,
    )
    return result


def with_progress(result: Measurement, progress: Path, total: int) -> Measurement:
    """Add what the per-feature log says: how many finished, which were slowest (when the
    engine times each feature: Spark runs them together and logs its phases instead)."""
    lines = (
        [json.loads(line) for line in progress.read_text().splitlines()]
        if progress.is_file()
        else []
    )
    rows = [r for r in lines if "feature" in r]
    timed = [r for r in rows if "seconds" in r]
    result.features_total = total
    result.features_done = sum(r["status"] == "ok" for r in rows)
    result.over_production_timeout = sum(r["seconds"] > PRODUCTION_TIMEOUT_S for r in timed)
    slow = sorted(timed, key=lambda r: -r["seconds"])[:3]
    result.slowest = [(r["feature"], r["seconds"]) for r in slow]
    result.feature_seconds = {r["feature"]: r["seconds"] for r in timed if r["status"] == "ok"}
    phases = [f"{k} {v:,.1f} s" for r in lines for k, v in r.get("phases", {}).items()]
    if phases:
        result.detail = "; ".join(filter(None, [result.detail, ", ".join(phases)]))
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        first = failed[0]
        summary = f"{len(failed)} features {first['status'][:60]} (first: {first['feature']})"
        # keep a failed process's own last line: it says why the run stopped
        result.detail = "; ".join(filter(None, [result.detail, summary]))
    return result


def run_duckdb(plan: Plan, copies: int, replica: Path, total: int) -> list[Measurement]:
    """Ingest into ``SCRATCH/x<N>.duckdb`` (fresh), then the catalog on it."""
    db = plan.scratch / f"x{copies}.duckdb"
    engine = "duckdb" if plan.duckdb_memory == DEFAULT_MEMORY else f"duckdb {plan.duckdb_memory}"
    results = []
    if "ingest" in plan.steps:
        db.unlink(missing_ok=True)
        db.with_suffix(".duckdb.wal").unlink(missing_ok=True)
        cmd = [str(AUTOFE), "ingest", "--db", str(db), "--workers", "2"]
        ingest = measure(plan, engine, "ingest", copies, [*cmd, "--json", str(replica)])
        if ingest.status != "ok":
            ingest.detail = f"stopped with {stored(db)}"
        results.append(ingest)
    if "features" in plan.steps and db.is_file() and all(r.status == "ok" for r in results):
        progress = plan.scratch / f"x{copies}.{engine.replace(' ', '-')}-features.jsonl"
        child = [str(PYTHON), __file__, "--child", "duckdb-features", "--db", str(db)]
        child += ["--catalog", str(plan.catalog), "--progress", str(progress)]
        child += ["--feature-timeout", str(plan.feature_timeout)]
        child += ["--duckdb-memory", plan.duckdb_memory]
        features = measure(plan, engine, "features", copies, child)
        results.append(with_progress(features, progress, total))
    return results


def stored(db: Path) -> str:
    """How far a stopped ingest got: files, runs and applications stored (transactions are
    whole, so the warehouse holds exactly the inputs it finished)."""
    import duckdb

    sql = (
        "SELECT (SELECT count(*) FROM ingested_files WHERE kind = 'workspace_json'), "
        "(SELECT count(*) FROM runs), (SELECT count(*) FROM applications)"
    )
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            files, runs, apps = con.execute(sql).fetchall()[0]
    except duckdb.Error as exc:
        return f"an unreadable warehouse ({str(exc).splitlines()[0][:80]})"
    return f"{files:,} workspace JSON files, {runs:,} runs, {apps:,} applications stored"


def run_spark(plan: Plan, copies: int, replica: Path, total: int) -> list[Measurement]:
    """``autofe ingest --engine spark`` into ``SCRATCH/x<N>.parquet`` (fresh), then the catalog
    on it, or (``--spark-tables-from-duckdb``) on the DuckDB warehouse's tables as Parquet."""
    tables = plan.scratch / f"x{copies}.parquet"
    results = []
    if "ingest" in plan.steps:
        shutil.rmtree(tables, ignore_errors=True)
        cmd = [str(AUTOFE), "ingest", "--engine", "spark", "--master", plan.master]
        cmd += [arg for kv in plan.spark_conf for arg in ("--conf", kv)]
        cmd += ["--out", str(tables), "--json", str(replica)]
        results.append(measure(plan, spark_label(plan), "ingest", copies, cmd))
    if plan.tables_from_duckdb:
        tables = export_tables(
            plan.scratch / f"x{copies}.duckdb", plan.scratch / f"x{copies}.from-duckdb.parquet"
        )
    done = (tables / "_autofe_tables.json").is_file()
    if "features" in plan.steps and done and all(r.status == "ok" for r in results):
        progress = plan.scratch / f"x{copies}.spark-features.jsonl"
        child = [str(PYTHON), __file__, "--child", "spark-features", "--tables", str(tables)]
        child += ["--catalog", str(plan.catalog), "--progress", str(progress)]
        child += ["--store", str(plan.scratch / f"x{copies}.spark-features.duckdb")]
        child += ["--master", plan.master]
        child += [arg for kv in plan.spark_conf for arg in ("--spark-conf", kv)]
        measured = measure(plan, spark_label(plan), "features", copies, child)
        features = with_progress(measured, progress, total)
        if plan.tables_from_duckdb:
            features.detail = "; ".join(filter(None, [features.detail, FROM_DUCKDB]))
        results.append(features)
    return results


FROM_DUCKDB = "tables: the DuckDB warehouse exported to Parquet"


def spark_conf(pairs: list[str] | None) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` options as a Spark settings dict."""
    return dict(pair.split("=", 1) for pair in pairs or [])


def spark_label(plan: Plan) -> str:
    """The engine as results name it: ``spark``, or with the settings it ran with."""
    return " ".join(("spark", *plan.spark_conf))


def export_tables(db: Path, out: Path) -> Path:
    """The warehouse ``db`` as a Spark table folder (untimed set-up), unless already there.

    The same files ``spark_ingest`` writes, by its own column mapping (``duckdb_select``) and
    manifest: on the 1× replica, ``materialize_on_spark`` computes identical values from
    these and from ``spark_ingest``'s (111 features, every value equal).
    """
    import duckdb

    from autofe.warehouse.parquet_tables import MANIFEST, duckdb_select, write_manifest
    from autofe.warehouse.tables import TABLES

    if (out / MANIFEST).is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    counts = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for t in TABLES:
            (out / t.name).mkdir(parents=True)
            target = out / t.name / "part-0.parquet"
            con.execute(f"COPY ({duckdb_select(t)}) TO '{target}' (FORMAT parquet)")
            counts[t.name] = int(con.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0])
    write_manifest(out, counts)
    return out


ENGINES = {"duckdb": run_duckdb, "spark": run_spark}


# --------------------------------------------------------------------------- results


def load_results(path: Path) -> list[Measurement]:
    if not path.is_file():
        return []
    rows = json.loads(path.read_text())
    return [Measurement(**{**r, "slowest": [tuple(s) for s in r["slowest"]]}) for r in rows]


def save_results(path: Path, old: list[Measurement], new: list[Measurement]) -> list[Measurement]:
    """``old`` with each of ``new`` replacing the entry of the same engine, step and size."""
    key = {(m.engine, m.step, m.copies): m for m in old}
    key.update({(m.engine, m.step, m.copies): m for m in new})
    merged = sorted(key.values(), key=lambda m: (m.step != "ingest", m.engine, m.copies))
    path.write_text(json.dumps([asdict(m) for m in merged], indent=1))
    return merged


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(seconds) on log(runs): 1 is linear, 2 quadratic.

    >>> round(slope([(10, 1.0), (100, 10.0), (1000, 100.0)]) or 0, 3)
    1.0
    """
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else None


def crossover(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float | None:
    """Runs at which two measured curves cross (log-log interpolation between sizes).

    >>> round(crossover([(10, 1.0), (100, 100.0)], [(10, 10.0), (100, 10.0)]) or 0)
    32
    """
    common = sorted(set(dict(a)) & set(dict(b)))
    da, db = dict(a), dict(b)
    for lo, hi in itertools.pairwise(common):
        d_lo = math.log(da[lo] / db[lo])
        d_hi = math.log(da[hi] / db[hi])
        if d_lo * d_hi < 0:
            frac = d_lo / (d_lo - d_hi)
            return math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo)))
    return None


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def _row(m: Measurement) -> str:
    status = m.status
    if m.features_total is not None:
        status += f", {m.features_done}/{m.features_total} features"
        if m.over_production_timeout:
            status += f", {m.over_production_timeout} over {PRODUCTION_TIMEOUT_S:g} s"
    if m.detail:
        status += f"; {m.detail}"
    slowest = "; ".join(f"{name} {s:.1f} s" for name, s in m.slowest[:2])
    per_k = m.seconds / m.runs * 1000 if m.runs else float("nan")
    return (
        f"| {m.engine} | {m.step} | {m.copies}× | {m.runs:,} | {m.seconds:,.1f} | {per_k:,.2f} | "
        f"{_mib(m.peak_tree_rss)} | {_mib(m.max_rss)} | {m.load_before:.2f} / {m.load_after:.2f} "
        f"| {status} | {slowest} |"
    )


def _curve(results: list[Measurement], engine: str, step: str) -> list[tuple[float, float]]:
    return sorted(
        (float(m.runs), m.seconds)
        for m in results
        if (m.engine, m.step, m.status) == (engine, step, "ok")
    )


def _done(results: list[Measurement], engines: Sequence[str]) -> list[Measurement]:
    return [m for m in results if m.engine in engines and (m.step, m.status) == ("features", "ok")]


def common_features(results: list[Measurement], engines: Sequence[str]) -> set[str]:
    """Features computed in every finished features measurement of ``engines``."""
    done = _done(results, engines)
    return set.intersection(*(set(m.feature_seconds) for m in done)) if done else set()


def _common_curve(
    results: list[Measurement], engine: str, common: set[str]
) -> list[tuple[float, float]]:
    """Query time summed over ``common`` features, per size."""
    return sorted(
        (float(m.runs), sum(m.feature_seconds[f] for f in common))
        for m in _done(results, [engine])
        if common
    )


def _growth_row(engine: str, step: str, curve: list[tuple[float, float]]) -> str:
    steps = [f"{slope([p, q]):.2f}" for p, q in itertools.pairwise(curve)]
    fit = slope(curve)
    sizes = ", ".join(f"{n:,.0f}" for n, _ in curve)
    return (
        f"| {engine} | {step} | {sizes} | {'-' if fit is None else f'{fit:.2f}'} | "
        f"{' → '.join(steps) or '-'} |"
    )


def growth_lines(results: list[Measurement]) -> list[str]:
    """Slopes per engine and step, and where DuckDB and Spark cross, if they do."""
    lines = [
        "| engine | step | sizes, runs | log-log slope of seconds on runs | between sizes |",
        "|---|---|---|---|---|",
    ]
    pairs = sorted({(m.engine, m.step) for m in results}, key=lambda k: (k[1] != "ingest", k))
    both = common_features(results, ("duckdb", "spark"))
    rows: list[tuple[str, str, list[tuple[float, float]]]] = []
    for engine, step in pairs:
        rows.append((engine, f"{step} (wall)", _curve(results, engine, step)))
        if step == "features":
            own = _common_curve(results, engine, common_features(results, [engine]))
            rows.append((engine, "features ok at every size (query time)", own))
            if engine in ("duckdb", "spark") and both:
                curve = _common_curve(results, engine, both)
                rows.append((engine, f"{len(both)} features both engines compute", curve))
    # a slope needs two sizes (a failed size, or one measured only once, gives none)
    lines += [_growth_row(*row) for row in rows if len(row[2]) >= 2]
    for step in ("ingest", "features"):
        duck, spark = _curve(results, "duckdb", step), _curve(results, "spark", step)
        if duck and spark:
            lines.append(f"\nCrossover, {step} (wall): {_where(crossover(duck, spark))}.")
    duck, spark = _common_curve(results, "duckdb", both), _common_curve(results, "spark", both)
    if duck and spark:
        lines.append(
            f"\nCrossover, the {len(both)} features both engines compute at every size (query "
            f"time): {_where(crossover(duck, spark))}."
        )
    return lines


def _where(cross: float | None) -> str:
    return "none within the measured sizes" if cross is None else f"at ~{cross:,.0f} runs"


def render(results: list[Measurement], scratch: Path) -> str:
    commits = sorted({m.commit for m in results})
    commands = sorted({m.command for m in results})
    replicas = [
        r for n in sorted({m.copies for m in results}) if (r := read_replica(scratch / f"x{n}"))
    ]
    lines = [
        f"Commit {', '.join(commits)}. Machine: {machine()}.",
        "Commands: " + "; ".join(f"`{c}`" for c in commands) + ".",
        "",
        "| replica | runs | jobs | event logs | on disk MB | built in s |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.copies}× | {r.runs:,} | {r.jobs:,} | {r.event_logs:,} | "
            f"{r.bytes / 1e6:,.0f} | {r.seconds:,.1f} |"
            for r in replicas
        ),
        "",
        "| engine | step | size | runs | seconds | s per 1k runs | peak RSS, tree MiB | "
        "largest process MiB | load 1-min before / after | status | slowest features |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(m) for m in results),
        "",
        *growth_lines(results),
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", default="1,10,100")
    parser.add_argument("--engines", default="duckdb,spark")
    parser.add_argument("--timeout", type=float, default=1500.0, help="Per measurement, s.")
    parser.add_argument("--feature-timeout", type=float, default=600.0, help="Per query, s.")
    parser.add_argument("--scratch", type=Path, default=Path("/work/scratch/scale"))
    parser.add_argument("--catalog", type=Path, default=CATALOG)
    parser.add_argument("--steps", default="ingest,features")
    parser.add_argument(
        "--duckdb-memory", default=DEFAULT_MEMORY, help="The features sandbox's memory limit."
    )
    parser.add_argument("--master", default="local[2]", help="Spark master of the Spark engine.")
    parser.add_argument(
        "--spark-tables-from-duckdb",
        action="store_true",
        help="Spark features on SCRATCH/x<N>.duckdb exported to Parquet (when its ingest cannot).",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        metavar="KEY=VALUE",
        help="A Spark setting for both Spark steps (repeatable), e.g. spark.driver.memory=4g.",
    )
    parser.add_argument(
        "--replica",
        choices=("workspace", "warehouse"),
        default="workspace",
        help="Sizes from `autofe lab replicate` (ingested) or `autofe warehouse replicate`.",
    )
    parser.add_argument("--settle-load", type=float, default=1.0)
    parser.add_argument("--settle-max", type=float, default=120.0)
    parser.add_argument("--write", type=Path)
    parser.add_argument("--section", default="scale", help="Results-file block to write.")
    parser.add_argument("--render-only", action="store_true", help="Only write stored results.")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tables", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> None:
    args = parse(sys.argv[1:])
    if args.child:
        CHILDREN[args.child](args)
        return
    args.scratch.mkdir(parents=True, exist_ok=True)
    store = args.scratch / "results.json"
    results = load_results(store)
    if not args.render_only:
        results = benchmark(args, results, store)
    body = render(results, args.scratch)
    print(body)
    if args.write:
        write_section(args.write, args.section, body)


def benchmark(
    args: argparse.Namespace, results: list[Measurement], store: Path
) -> list[Measurement]:
    from autofe.feature_catalog import load_catalog

    command = ".venv/bin/python benchmarks/scale.py " + " ".join(sys.argv[1:])
    plan = Plan(
        args.scratch, args.catalog, args.timeout, args.feature_timeout, args.settle_load,
        args.settle_max, command.strip(), tuple(args.steps.split(",")), args.duckdb_memory,
        args.master, args.spark_tables_from_duckdb or args.replica == "warehouse",
        tuple(args.spark_conf or ()), args.replica,
    )  # fmt: skip
    if plan.replica == "warehouse":
        plan = replace(plan, steps=tuple(s for s in plan.steps if s != "ingest"))
    total = len(load_catalog(args.catalog))
    for copies in (int(c) for c in args.copies.split(",")):
        if plan.replica == "warehouse":
            replica = ensure_warehouse_replica(args.scratch, copies)
        else:
            replica = ensure_replica(args.scratch, copies)
        for engine in args.engines.split(","):
            results = save_results(store, results, ENGINES[engine](plan, copies, replica, total))
    return results


if __name__ == "__main__":
    main()
