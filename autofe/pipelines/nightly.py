"""``autofe nightly``: ingest what is new, retrain warm, promote only a better model.

One night, under the home folder's lock (:mod:`autofe.pipelines.nightly_lock`):

1. **ingest** the workspace into a copy of ``HOME/warehouse.duckdb`` that then replaces it;
   the ingest ledger skips every file already ingested, so only new runs cost time (their
   number is reported);
2. **loop**: the agent loop in ``HOME/nightly/<stamp>/run/`` on a copy of that warehouse, warm
   started from the active model's feature catalog (every feature re-proposed in round 0 and
   re-checked by the gates and the evaluator, new ones proposed beside them; mode ``full``
   starts cold instead, without the catalog); the evaluator's
   holdout is the comparison window, so feature selection never sees the runs it is judged on;
3. **compare** challenger and champion on the window (:mod:`autofe.pipelines.nightly_compare`);
4. **drift** of the champion since its promotion (:mod:`autofe.pipelines.nightly_drift`);
5. **register**: a better challenger becomes a registry version and the active one; otherwise
   the kept champion and the reason are recorded.

Nothing touches the active pointer before step 5, and the pointer write is atomic, so a crash
anywhere leaves the champion serving. Every night writes ``HOME/nightly/<stamp>/nightly.json``
(``status`` ``done`` or ``failed``), which :func:`nightly_history` lists.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autofe.agents.llm import LLMSettings
from autofe.agents.settings import LoopSettings
from autofe.config import IngestSettings, workspace_path
from autofe.errors import AutofeError, ConfigError, ModelError, WarehouseError, first_line
from autofe.feature_catalog import CATALOG_FILE, load_catalog
from autofe.featurespec import FeatureSpec
from autofe.ingest.ingest import ingest
from autofe.ingest.workspace.inputs import is_workspace
from autofe.json_file import write_json
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.modeling.artifact import Artifact, load_model
from autofe.modeling.compute import compute_values
from autofe.modeling.dataset import LABELLED_SQL, FeatureValues, Labelled, as_labelled
from autofe.modeling.novelty import NOVELTY_SQL, Novelty, novel_runs
from autofe.modeling.registry import FEATURES_DIR, Registry, Version
from autofe.pipelines.home import Home
from autofe.pipelines.nightly_compare import (
    Decision,
    Window,
    choose_window,
    decide,
    deployed_score,
    metrics_of,
    score_on_window,
)
from autofe.pipelines.nightly_drift import RunInfo, drift_report
from autofe.pipelines.nightly_handle import check_handle, running_job
from autofe.pipelines.nightly_lock import hold_lock
from autofe.pipelines.nightly_records import MODES, RECORD_FILE, Mode
from autofe.pipelines.run import Progress, RunSettings, run
from autofe.run_dir import RunDir
from autofe.sandbox.session import Sandbox
from autofe.warehouse.connect import open_warehouse, schema_fingerprint

NIGHT_AGAIN = (
    "Nothing was promoted and the champion keeps serving: fix the endpoint, then run "
    "`autofe nightly` again, or use `--llm offline`"
)
RUN_DIR = "run"
Notice = Callable[[str], None]


@dataclass(frozen=True)
class NightlySettings:
    """What one night runs with."""

    workspace: Path
    home: Path
    margin: float = 0.02
    """Relative MAPE improvement a challenger needs to be promoted (0.02: 2 % less error)."""
    recent: int | None = None
    """Window size in runs; None: the latest 20 % or the runs since the last promotion."""
    loop: LoopSettings = field(default_factory=LoopSettings)
    llm: LLMSettings = field(default_factory=lambda: LLMSettings(backend="offline"))
    mode: Mode = "incremental"
    """``incremental``: the loop is warm started from the active model's catalog; ``full``:
    cold, every feature proposed anew (a regeneration when the champion's features went stale)."""
    handle: str | None = None
    """The scheduler job this night runs (``HOME/scheduler.sqlite``), reported as it goes."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin < 1.0:
            raise ConfigError(f"--margin {self.margin}: must be at least 0 and below 1")
        parse_mode(self.mode)
        if self.handle is not None and not self.handle.strip():
            raise ConfigError("--handle: must not be empty")


def parse_mode(text: str) -> Mode:
    """``--mode`` checked.

    >>> parse_mode("full")
    'full'
    """
    for mode in MODES:
        if text == mode:
            return mode
    raise ConfigError(f"--mode {text}: must be one of {', '.join(MODES)}")


@dataclass(frozen=True)
class NightlyResult:
    """Where the night's folder is and what ``nightly.json`` says."""

    folder: Path
    record: dict[str, Any]


def nightly(
    settings: NightlySettings,
    kb: KnowledgeBase | None = None,
    progress: Progress | None = None,
    notice: Notice | None = None,
) -> NightlyResult:
    """Run one night (see the module docstring) and return its record.

    With a handle, the scheduler job is checked before anything is made, and reported
    ``started`` once the lock is held, then ``succeeded`` or ``failed``
    (:mod:`autofe.pipelines.nightly_handle`).

    Raises:
        ConfigError: the workspace or the home folder is unusable, an option is invalid, or
            the handle is not a queued job of the home's scheduler store.
        LockHeld: another nightly run holds ``HOME/nightly.lock`` (the job stays queued).
        AutofeError: a step failed on purpose (the record says which, with status failed).
    """
    say = notice or (lambda _: None)
    workspace = check_workspace(settings.workspace)
    if settings.handle is not None:
        check_handle(settings.home, settings.handle)
    home = open_home(settings.home)
    with hold_lock(home.lock, say), running_job(home.root, settings.handle, say):
        night = _Night.start(home, settings, workspace)
        try:
            _work(night, settings, workspace, home, kb, progress, say)
        except BaseException as exc:
            night.fail(exc)
            raise
        result = night.finish()
    _check_triggers(home, result.record, say)
    return result


def _check_triggers(home: Home, record: dict[str, Any], say: Notice) -> None:
    """The retraining triggers after the night (its job is finished by now, so a firing
    requests a new retraining rather than attaching to this one). A failing check is a
    notice: the night's result stands."""
    from autofe.pipelines.triggers import after_night  # it reads this module's functions

    try:
        fired = after_night(home.root, record)
    except (AutofeError, OSError) as exc:
        say(f"triggers not checked: {first_line(exc)}")
        return
    for firing in fired:
        say(f"trigger {firing['kind']} ({firing['tier']}): {firing['reason']}: {firing['action']}")


def check_workspace(path: Path) -> Path:
    """The workspace folder to ingest (a packed one unpacked first).

    Raises:
        ConfigError: no such folder, or not laid out as a workspace export.
    """
    folder = workspace_path(path)
    if not folder.is_dir():
        raise ConfigError(f"--workspace {path}: no such folder")
    if not is_workspace(folder):
        raise ConfigError(
            f"--workspace {path}: not a workspace export (no jobs.json, no JSON in jobs/ or "
            "runs/; see docs/workspace.md)"
        )
    return folder.resolve()


def open_home(path: Path) -> Home:
    """The home folder, created when missing.

    Raises:
        ConfigError: it is a file, cannot be created, or is not writable.
    """
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--home {path}: not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--home {path}: cannot create it ({exc.strerror})") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"--home {path}: not writable")
    return Home(path.resolve())


# --------------------------------------------------------------------------- the night's record


@dataclass
class _Night:
    """The night's folder and record, timed phase by phase, written once at the end."""

    folder: Path
    record: dict[str, Any]
    phase_name: str = "start"

    @classmethod
    def start(cls, home: Home, settings: NightlySettings, workspace: Path) -> _Night:
        folder = _new_folder(home.nightly_runs)
        record: dict[str, Any] = {
            "stamp": folder.name,
            "status": "running",
            "started": _now(),
            "workspace": str(workspace),
            "home": str(home.root),
            "margin": settings.margin,
            "mode": settings.mode,
            "handle": settings.handle,
            "seconds": {},
        }
        return cls(folder, record)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.phase_name = name
        started = time.perf_counter()
        try:
            yield
        finally:
            self.record["seconds"][name] = round(time.perf_counter() - started, 3)

    def fail(self, exc: BaseException) -> None:
        failed = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        error = {"phase": self.phase_name, "type": type(exc).__name__, "message": str(exc)}
        self.record |= {"status": failed, "error": error}
        self._write()

    def finish(self) -> NightlyResult:
        self.record["status"] = "done"
        self._write()
        return NightlyResult(self.folder, self.record)

    def _write(self) -> None:
        seconds = self.record["seconds"]
        seconds["total"] = round(sum(v for k, v in seconds.items() if k != "total"), 3)
        self.record["finished"] = _now()
        write_json(self.folder / RECORD_FILE, self.record, default=str)


def _new_folder(root: Path) -> Path:
    """``root/<UTC stamp>``, with a suffix when two nights start in one second."""
    root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 1000):
        folder = root / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise ConfigError(f"{root}: cannot make a folder for tonight's run")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- the steps


@dataclass(frozen=True)
class Champion:
    """The active version: its artifact and feature values on today's warehouse (None, with
    ``error``, when it cannot be loaded or its features cannot be computed any more), and the
    submit time of the last run it was trained on."""

    version: Version
    artifact: Artifact | None
    values: FeatureValues | None
    error: str | None
    trained_through: datetime | None

    @property
    def catalog(self) -> Path | None:
        """Its feature catalog folder, the warm start (None when the version has none)."""
        folder = self.version.path / FEATURES_DIR
        return folder if (folder / CATALOG_FILE).is_file() else None

    def as_dict(self) -> dict[str, Any]:
        specs = self.artifact.specs if self.artifact else ()
        return {"version": self.version.name, "features": len(specs), "error": self.error}


def _work(
    night: _Night,
    settings: NightlySettings,
    workspace: Path,
    home: Home,
    kb: KnowledgeBase | None,
    progress: Progress | None,
    say: Notice,
) -> None:
    """The steps in order; each fills its part of the record."""
    with night.phase("ingest"):
        night.record["ingest"] = ingest_new(home.warehouse, workspace)
        say(_ingest_line(night.record["ingest"]))
    with night.phase("champion"):
        champion = load_champion(home.registry, home.warehouse)
        labelled = read_labelled(home.warehouse)
        through = champion.trained_through if champion else None
        window = choose_window(labelled, through, settings.recent)
        night.record["window"] = window.as_dict()
    with night.phase("loop"):
        challenger = _challenge(night, settings, workspace, home, champion, window, kb, progress)
    with night.phase("compare"):
        margin = settings.margin
        decision = _compare(night, home.warehouse, labelled, window, challenger, champion, margin)
    with night.phase("drift"):
        night.record["drift"] = _drift(home, labelled, champion)
    with night.phase("register"):
        _register(night, home.registry, decision, champion, labelled)
    say(f"{night.record['decision']}: {night.record['reason']}")
    # The loop's warehouse is a copy of HOME's as of tonight, only needed to resume the loop:
    # kept it would add the warehouse's size to the home folder every night.
    RunDir(night.folder / RUN_DIR).warehouse.unlink(missing_ok=True)


def ingest_new(db: Path, workspace: Path) -> dict[str, Any]:
    """Ingest the workspace into ``db``; files ingested before are skipped by the ledger.

    The ingest writes a copy that then replaces ``db`` in one rename. DuckDB lets a file be
    open for writing only when no other process has it open at all, so ingesting in place would
    fail whenever ``autofe serve`` (or anyone) is reading the warehouse, and would block them
    meanwhile; readers of the old file keep reading it until they close it. A crash mid-ingest
    leaves ``db`` as it was.

    Returns the counts: new runs (and how many of them are labelled), files ingested and
    unchanged, and the files that could not be read (skipped; retried next night).
    """
    staging = db.with_name(f".{db.name}.ingest")
    _remove_database(staging)  # a crashed night's leftover
    if db.exists():
        shutil.copyfile(db, staging)
    before = _run_ids(staging)
    report = ingest([workspace], IngestSettings(db=staging))
    after = _run_ids(staging)
    os.replace(staging, db)
    new = after.keys() - before.keys()
    return {
        "new_runs": len(new),
        "new_labelled": sum(after[r] for r in new),
        "runs": len(after),
        "files_ingested": report.files_ingested,
        "files_unchanged": report.files_unchanged,
        "skipped": [i.as_dict() for i in report.issues if i.fatal],
        "issues": len(report.issues),
    }


def _run_ids(db: Path) -> dict[str, bool]:
    """Every run id in the warehouse, and whether it is labelled (none before the first).

    Opened for writing so that closing it checkpoints: the file alone then holds every row
    (a write-ahead log left beside it would not follow the file when it is renamed).
    """
    if not db.exists():
        return {}
    con = open_warehouse(db)
    try:
        labelled = {str(r[0]) for r in con.execute(LABELLED_SQL).fetchall()}
        ids = [str(r[0]) for r in con.execute("SELECT run_id FROM runs").fetchall()]
        con.execute("CHECKPOINT")
    finally:
        con.close()
    if _wal(db).exists():
        raise WarehouseError(f"{db}: a write-ahead log is left after a checkpoint; not renamed")
    return {r: r in labelled for r in ids}


def _wal(db: Path) -> Path:
    return db.with_name(f"{db.name}.wal")


def _remove_database(db: Path) -> None:
    db.unlink(missing_ok=True)
    _wal(db).unlink(missing_ok=True)


def _ingest_line(counts: dict[str, Any]) -> str:
    line = (
        f"ingest: {counts['new_runs']} new runs ({counts['new_labelled']} labelled), "
        f"{counts['runs']} in the warehouse"
    )
    return line + (f"; {len(counts['skipped'])} files skipped" if counts["skipped"] else "")


def load_champion(registry: Registry, db: Path) -> Champion | None:
    """The active version with its feature values on ``db`` (None before the first
    promotion). A model that no longer loads (another schema, a tampered file) or whose
    features fail on today's warehouse is reported, not raised: a challenger may replace it.

    Raises:
        ModelError: the active pointer names no version (the registry needs a look).
    """
    version = registry.active()
    if version is None:
        return None
    artifact: Artifact | None = None
    values: FeatureValues | None = None
    error = None
    try:
        artifact = registry.load(version.name, schema_fingerprint())
        values = feature_values(db, artifact.specs)
    except ModelError as exc:
        error = str(exc)
    return Champion(version, artifact, values, error, _trained_through(version, artifact))


def _trained_through(version: Version, artifact: Artifact | None) -> datetime | None:
    """The submit time of the last labelled run the version was trained on (its metrics say;
    for a version registered by something else, the end of its model's fit window)."""
    stated = version.metrics.get("trained_through")
    if stated:
        return datetime.fromisoformat(str(stated))
    return artifact.model.window[1] if artifact else None


def feature_values(db: Path, specs: tuple[FeatureSpec, ...]) -> FeatureValues:
    """Every run's values of ``specs`` on the warehouse at ``db``.

    Raises:
        ModelError: a feature's SQL fails.
    """
    with Sandbox.open(db) as sandbox:
        return compute_values(sandbox, specs)


def read_labelled(db: Path) -> Labelled:
    """The warehouse's labelled runs in submit order."""
    with Sandbox.open(db) as sandbox:
        return as_labelled(_all_rows(sandbox, LABELLED_SQL))


def read_novelty(db: Path) -> Novelty:
    """Which labelled runs are new to their job's history (:mod:`autofe.modeling.novelty`)."""
    with Sandbox.open(db) as sandbox:
        return novel_runs(_all_rows(sandbox, NOVELTY_SQL))


def _all_rows(sandbox: Sandbox, sql: str) -> list[Any]:
    result = sandbox.query(sql)
    if result.truncated:
        raise ConfigError(f"more rows than the sandbox's max_rows ({sandbox.limits.max_rows})")
    return list(result.rows)


def _challenge(
    night: _Night,
    settings: NightlySettings,
    workspace: Path,
    home: Home,
    champion: Champion | None,
    window: Window,
    kb: KnowledgeBase | None,
    progress: Progress | None,
) -> Artifact | None:
    """The agent loop on a copy of the home warehouse; its model (None if it kept nothing).
    A full night is cold: the champion's catalog is not proposed again."""
    catalog = champion.catalog if champion and settings.mode == "incremental" else None
    evaluation = replace(settings.loop.evaluation, holdout=window.share)
    loop = replace(settings.loop, evaluation=evaluation)
    warm = str(catalog) if catalog else None
    out = night.folder / RUN_DIR
    metrics = run(
        RunSettings(str(workspace), loop, settings.llm, warm),
        out,
        kb,
        progress,
        warehouse=home.warehouse,
        again=NIGHT_AGAIN,
    ).metrics
    night.record["loop"] = {
        "run_dir": str(out),
        **{k: metrics[k] for k in ("proposed", "accepted", "stop_reason", "seconds")},
        "iterations": len(metrics["iterations"]),
    }
    night.record["warm_start"] = _warm_start(champion, catalog, out)
    has_model = RunDir(out).model.is_file()
    return load_model(out, schema_fingerprint()) if has_model else None


def _warm_start(champion: Champion | None, catalog: Path | None, out: Path) -> dict[str, Any]:
    """How many of the champion's features the loop kept again, and which it dropped."""
    if champion is None or catalog is None:
        return {"version": None, "features": 0, "kept_again": 0, "dropped": []}
    seed = load_catalog(catalog)
    kept = _catalog_ids(RunDir(out).features)
    return {
        "version": champion.version.name,
        "features": len(seed),
        "kept_again": sum(s.feature_id in kept for s in seed),
        "dropped": sorted(s.name for s in seed if s.feature_id not in kept),
    }


def _catalog_ids(folder: Path) -> set[str]:
    if not (folder / CATALOG_FILE).is_file():
        return set()
    return {s.feature_id for s in load_catalog(folder)}


def _compare(
    night: _Night,
    db: Path,
    labelled: Labelled,
    window: Window,
    challenger: Artifact | None,
    champion: Champion | None,
    margin: float,
) -> Decision:
    """Score both feature sets on the window, decide, and record it all."""
    novel = read_novelty(db)
    challenger_mape = _score_challenger(night, db, labelled, novel, window, challenger)
    champion_mape = _score_champion(night, labelled, novel, window, champion)
    error = champion.error if champion else None
    decision = decide(challenger_mape, champion_mape, margin, error)
    label = "promoted" if decision.promote else ("kept" if champion else "none")
    night.record |= {"decision": label, "reason": decision.reason}
    return decision


def _score_challenger(
    night: _Night,
    db: Path,
    labelled: Labelled,
    novel: Novelty,
    window: Window,
    challenger: Artifact | None,
) -> float | None:
    if challenger is None:
        night.record["challenger"] = None
        return None
    scored = score_on_window(labelled, feature_values(db, challenger.specs), window, novel)
    night.record["challenger"] = {"features": len(challenger.specs), "window": metrics_of(scored)}
    return scored.metrics.mape


def _score_champion(
    night: _Night, labelled: Labelled, novel: Novelty, window: Window, champion: Champion | None
) -> float | None:
    """The champion's window score (refit before the window) and, beside it, the deployed
    model's (``seen_in_training``: window runs it was trained on, so its score flatters)."""
    night.record["champion"] = champion.as_dict() if champion else None
    if champion is None or champion.artifact is None or champion.values is None:
        return None
    scored = score_on_window(labelled, champion.values, window, novel)
    recent = labelled[len(labelled) - window.size :]
    deployed = deployed_score(champion.artifact, recent, champion.values, novel)
    through = champion.trained_through
    seen = sum(1 for r in recent if through is not None and r[2] <= through)
    night.record["champion"] |= {
        "window": metrics_of(scored),
        "deployed": {**(metrics_of(deployed) or {}), "seen_in_training": seen},
    }
    return scored.metrics.mape


def _drift(home: Home, labelled: Labelled, champion: Champion | None) -> dict[str, Any] | None:
    """The champion's drift report (None without a usable champion)."""
    if champion is None or champion.artifact is None or champion.values is None:
        return None
    if champion.trained_through is None:
        return None
    job_names, runs = jobs_and_runs(home.warehouse)
    return drift_report(
        champion.artifact,
        labelled,
        champion.values,
        champion.trained_through,
        job_names,
        runs,
        home.actuals,
    )


def jobs_and_runs(db: Path) -> tuple[dict[str, str], dict[str, RunInfo]]:
    """Job names by id, and every run's job id and submit time."""
    with Sandbox.open(db) as sandbox:
        jobs = _all_rows(sandbox, "SELECT job_id, name FROM jobs")
        runs = _all_rows(sandbox, "SELECT run_id, coalesce(job_id, ''), submit_time FROM runs")
    return {str(j): str(n or "") for j, n in jobs}, {str(r): (str(j), t) for r, j, t in runs}


def _register(
    night: _Night,
    registry: Registry,
    decision: Decision,
    champion: Champion | None,
    labelled: Labelled,
) -> None:
    """Promote the challenger (a new version, then the pointer), or record the kept one."""
    active = champion.version.name if champion else None
    details = {"nightly": night.folder.name, "challenger": night.record["challenger"]}
    if not decision.promote:
        registry.record(
            {"decision": night.record["decision"], "version": active, "reason": decision.reason},
            details,
        )
        night.record["version"] = active
        return
    metrics = {
        "window": night.record["challenger"]["window"],
        "trained_through": labelled[-1][2].isoformat(),
        "features": night.record["challenger"]["features"],
        "nightly": night.folder.name,
    }
    version = registry.add(night.folder / RUN_DIR, metrics)
    registry.promote(version.name, decision.reason, details)
    night.record["version"] = version.name
