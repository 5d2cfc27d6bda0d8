"""``autofe nightly`` on real lab runs: the first 150 runs of the shipped example workspace make
the first night, the next 40 arrive before a later one. The loop is kept to one short round."""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nightly_jobs import submit_retraining
from typer.testing import CliRunner

from autofe.agents.settings import EvalSettings, LoopSettings, Targets
from autofe.cli import app
from autofe.config import example_workspace
from autofe.console import EXIT_USER_ERROR
from autofe.knowledge_base.embeddings import HashingEmbedder
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.modeling.predict import predict_run
from autofe.modeling.psi import psi
from autofe.modeling.registry import ACTIVE_FILE, Registry
from autofe.pipelines import nightly as nightly_module
from autofe.pipelines.home import Home
from autofe.pipelines.nightly import (
    NightlyResult,
    NightlySettings,
    feature_values,
    nightly,
    read_labelled,
)
from autofe.pipelines.nightly_records import nightly_history
from autofe.pipelines.retraining_estimate import estimate_retraining, prior_estimate
from autofe.run_dir import RunDir
from autofe.scheduler.store import JobStore
from autofe.warehouse.connect import schema_fingerprint

FIRST, LATER = 150, 40
PER_ROUND = 6
LOOP = LoopSettings(
    Targets(r2=2.0, mape=None),  # unreachable: the round count decides
    max_iterations=1,
    budget_seconds=60.0,
    per_round=PER_ROUND,
    evaluation=EvalSettings(folds=3),
)
runner = CliRunner()
REASON = re.compile(
    r"challenger MAPE (?P<challenger>[\d.]+) % vs champion (?P<champion>[\d.]+) %: "
    r"(not better by (?P<margin>\d+) %|[\d.]+ % better \(margin (?P<needed>\d+) %\))"
)


# --------------------------------------------------------------------------- a lab subset


def runs_in_start_order(workspace: Path) -> list[Path]:
    files = (workspace / "runs").glob("*.json")
    return sorted(files, key=lambda p: (json.loads(p.read_text())["start_time"], p.name))


def add_runs(source: Path, dest: Path, runs: Sequence[Path]) -> None:
    """Copy runs with their cluster and its delivered event log (one cluster per lab run)."""
    for folder in ("runs", "clusters"):
        (dest / folder).mkdir(parents=True, exist_ok=True)
    for run in runs:
        cluster = json.loads(run.read_text())["cluster_instance"]["cluster_id"]
        shutil.copy2(run, dest / "runs" / run.name)
        shutil.copy2(source / "clusters" / f"{cluster}.json", dest / "clusters")
        shutil.copytree(source / "cluster-logs" / cluster, dest / "cluster-logs" / cluster)


def lab_subset(source: Path, dest: Path, runs: Sequence[Path]) -> Path:
    """A workspace with the source's jobs, scripts and table stats and only ``runs``."""
    for folder in ("jobs", "scripts", "table_stats"):
        shutil.copytree(source / folder, dest / folder)
    shutil.copy2(source / "node_types.json", dest)
    add_runs(source, dest, runs)
    return dest


@dataclass(frozen=True)
class Lab:
    source: Path
    runs: list[Path]
    workspace: Path
    """The first night's workspace: the first FIRST runs."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    source = example_workspace()
    runs = runs_in_start_order(source)
    workspace = lab_subset(source, tmp_path_factory.mktemp("ws") / "lab", runs[:FIRST])
    return Lab(source, runs, workspace)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    return KnowledgeBase(index_dir=tmp_path_factory.mktemp("kb"), embedder=HashingEmbedder())


def night(workspace: Path, home: Path, kb: KnowledgeBase, **options: Any) -> NightlyResult:
    return nightly(NightlySettings(workspace, home, loop=LOOP, **options), kb=kb)


@pytest.fixture(scope="module")
def first(lab: Lab, kb: KnowledgeBase, tmp_path_factory: pytest.TempPathFactory) -> NightlyResult:
    """The first night on an empty home."""
    return night(lab.workspace, tmp_path_factory.mktemp("first") / "home", kb)


@pytest.fixture
def home(first: NightlyResult, tmp_path: Path) -> Path:
    """A copy of the home after the first night, for a test to change."""
    return Path(shutil.copytree(first.record["home"], tmp_path / "home"))


def dead_pid() -> int:
    """The id of a process that has exited (and was reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    return int(child.stdout)


@contextmanager
def reader_of(db: Path) -> Iterator[None]:
    """Another process holding ``db`` open read-only (DuckDB then refuses any writer of it)."""
    hold = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
        "print('open', flush=True); sys.stdin.read()"
    )
    reader = subprocess.Popen([sys.executable, "-c", hold, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "open\n"
        yield
    finally:
        reader.communicate("")  # closing its stdin ends it


def active_bytes(home: Path) -> bytes:
    return (home / "models" / ACTIVE_FILE).read_bytes()


# --------------------------------------------------------------------------- first night


def test_the_first_night_ingests_everything_and_promotes(first: NightlyResult) -> None:
    record, home = first.record, Home(Path(first.record["home"]))
    labelled = read_labelled(home.warehouse)
    assert record["status"] == "done" and record["decision"] == "promoted"
    assert record["reason"] == "no active model" and record["version"] == "v0001"
    assert record["ingest"]["new_runs"] == record["ingest"]["runs"] == FIRST
    assert record["ingest"]["new_labelled"] == len(labelled)
    assert record["window"]["runs"] == math.ceil(0.2 * len(labelled))
    assert record["champion"] is None and record["drift"] is None
    assert record["warm_start"]["version"] is None
    active = home.registry.active()
    assert active is not None and active.name == "v0001"
    promoted = home.registry.version("v0001")
    assert promoted.metrics["trained_through"] == labelled[-1][2].isoformat()
    assert (promoted.path / "features" / "catalog.json").is_file()
    # the comparison's challenger score is the loop's own holdout: the evaluator's holdout was
    # set to the window, so the loop never selected features on the runs it is judged on
    run = json.loads((first.folder / "run" / "metrics.json").read_text())
    assert record["challenger"]["window"] == run["holdout"]
    assert not home.lock.exists() and not (first.folder / "run" / "warehouse.duckdb").exists()
    assert json.loads((first.folder / "nightly.json").read_text()) == json.loads(
        json.dumps(record, default=str)
    )
    assert set(record["seconds"]) == {
        "ingest", "champion", "loop", "compare", "drift", "register", "total"
    }  # fmt: skip
    assert [h["decision"] for h in home.registry.history()] == ["promoted"]


# --------------------------------------------------------------------------- unchanged workspace


def test_an_unchanged_workspace_keeps_the_champion_with_a_reason(lab: Lab, home: Path) -> None:
    before = active_bytes(home)
    gone = dead_pid()
    stale = {"pid": gone, "host": socket.gethostname(), "started": "2026-11-30T02:00:00+00:00"}
    (home / "nightly.lock").write_text(json.dumps(stale))  # left by a night killed outright
    args = ["nightly", "--workspace", str(lab.workspace), "--home", str(home), "--json"]
    args += ["--margin", "0.99", "--max-iterations", "1", "--per-round", str(PER_ROUND)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert f"cleared a stale lock {home / 'nightly.lock'}: pid {gone}" in result.stderr
    assert not (home / "nightly.lock").exists()
    assert record["ingest"]["new_runs"] == 0 and record["ingest"]["files_ingested"] == 0
    assert record["decision"] == "kept" and record["version"] == "v0001"
    said = REASON.fullmatch(record["reason"])
    assert said is not None and said["margin"] == "99", record["reason"]
    for who in ("challenger", "champion"):
        assert float(said[who]) == pytest.approx(record[who]["window"]["mape"] * 100, abs=0.051)
    assert active_bytes(home) == before
    last = Registry(home).history()[-1]
    assert last["decision"] == "kept" and last["reason"] == record["reason"]
    # warm start: round 0 proposed every champion feature again, plus a round of new ones
    warm = record["warm_start"]
    assert warm["version"] == "v0001" and warm["features"] > 0
    assert record["loop"]["proposed"] == warm["features"] + PER_ROUND
    assert 0 < warm["kept_again"] <= warm["features"]
    # the champion's training window covers the whole window here: its deployed score is
    # in-sample, which is why the decision uses the refit score
    assert record["champion"]["deployed"]["seen_in_training"] == record["window"]["runs"]
    assert record["drift"]["new_runs"] == 0


# --------------------------------------------------------------------------- modes and handles


def test_a_full_night_starts_cold_without_the_champions_catalog(lab: Lab, home: Path) -> None:
    args = ["nightly", "--workspace", str(lab.workspace), "--home", str(home), "--mode", "full"]
    result = runner.invoke(app, [*args, "--max-iterations", "1", "--per-round", str(PER_ROUND)])
    assert result.exit_code == 0, result.output
    assert "mode: full (cold start)" in result.stdout
    record = nightly_history(home)[-1]
    assert record["status"] == "done" and (record["mode"], record["handle"]) == ("full", None)
    # no warm start: round 0 held only the backend's own proposals, none of origin catalog
    assert record["warm_start"] == {"version": None, "features": 0, "kept_again": 0, "dropped": []}
    assert record["loop"]["proposed"] == PER_ROUND
    saved = json.loads(RunDir(Path(record["loop"]["run_dir"])).settings.read_text())
    assert saved["warm_start"] is None
    assert record["champion"]["version"] == "v0001"  # still the one a challenger must beat
    assert nightly_history(home)[0]["mode"] == "incremental"  # the first night, warm by default


def test_a_night_runs_its_scheduler_job_and_reports_it(
    lab: Lab, home: Path, kb: KnowledgeBase
) -> None:
    handle = submit_retraining(home)
    record = night(lab.workspace, home, kb, handle=handle).record
    assert (record["status"], record["mode"], record["handle"]) == ("done", "incremental", handle)
    assert record["warm_start"]["version"] == "v0001"
    job = JobStore.in_home(home).get(handle)
    assert job.state == "succeeded"
    assert [e.kind for e in job.events] == ["submitted", "started", "succeeded"]
    assert job.started_at is not None and job.finished_at is not None
    assert job.finished_at - job.started_at >= record["seconds"]["loop"]
    assert nightly_history(home)[-1]["handle"] == handle


@pytest.mark.parametrize("crash", [OSError("No space left on device\nretry"), KeyboardInterrupt()])
def test_a_failed_night_fails_its_scheduler_job_with_the_reason(
    lab: Lab, home: Path, kb: KnowledgeBase, crash: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = submit_retraining(home)

    def fail(*args: object, **kwargs: object) -> None:
        raise crash

    monkeypatch.setattr(nightly_module, "run", fail)
    with pytest.raises(type(crash)):
        night(lab.workspace, home, kb, handle=handle)
    record = nightly_history(home)[-1]
    assert record["status"] == ("failed" if isinstance(crash, OSError) else "interrupted")
    assert record["handle"] == handle
    job = JobStore.in_home(home).get(handle)
    assert job.state == "failed"
    assert [e.kind for e in job.events] == ["submitted", "started", "failed"]
    reason = "No space left on device" if isinstance(crash, OSError) else "KeyboardInterrupt"
    assert job.events[-1].detail == {"reason": reason}  # the error's first line
    assert not (home / "nightly.lock").exists()


def test_past_nights_estimate_the_next_retraining(lab: Lab, home: Path, kb: KnowledgeBase) -> None:
    for _ in range(2):  # with the first: three incremental nights done
        night(lab.workspace, home, kb)
    totals = [r["seconds"]["total"] for r in nightly_history(home)]
    estimate = estimate_retraining(home, "incremental", LOOP.budget_seconds)
    assert estimate.source == "history" and estimate.nights == len(totals) == 3
    assert estimate.p50_s == statistics.median(totals)
    # three points lie within 1.155 sample sds of their mean: all inside the 90 % interval
    assert estimate.low_s <= min(totals) and max(totals) <= estimate.high_s
    # no full night yet: the budget's prior, longer than the incremental nights took
    full = estimate_retraining(home, "full", LOOP.budget_seconds)
    assert full == prior_estimate("full", LOOP.budget_seconds) and full.nights == 0
    assert full.p50_s > estimate.p50_s


# --------------------------------------------------------------------------- new runs


@pytest.fixture
def grown(lab: Lab, tmp_path: Path) -> Path:
    """The first night's workspace plus the next LATER runs."""
    workspace = Path(shutil.copytree(lab.workspace, tmp_path / "grown"))
    add_runs(lab.source, workspace, lab.runs[FIRST : FIRST + LATER])
    return workspace


def test_new_runs_are_ingested_compared_and_their_drift_reported(
    lab: Lab, grown: Path, home: Path, kb: KnowledgeBase
) -> None:
    champion = Registry(home).load("v0001", schema_fingerprint())
    new_ids = [str(json.loads(p.read_text())["run_id"]) for p in lab.runs[FIRST : FIRST + 3]]
    # the API may write ids as numbers: matched as text
    lines = [json.dumps({"run_id": int(r), "job_id": "x", "duration_s": 20.0}) for r in new_ids]
    served = {"run_id": new_ids[0], "duration_s": 20.0, "predicted_p50_s": 25.0}
    lines[0] = json.dumps(served)  # as the API logs it when it had predicted the run
    lines += [json.dumps({"run_id": "no-such-run", "duration_s": 5.0}), '{"run_id": "torn']
    (home / "actuals.jsonl").write_text("\n".join(lines) + "\n")
    with reader_of(Home(home).warehouse):  # as `autofe serve` reads it while the night runs
        record = night(grown, home, kb).record

    assert record["ingest"]["new_runs"] == LATER
    labelled = read_labelled(Home(home).warehouse)
    new = record["ingest"]["new_labelled"]
    window = record["window"]
    assert window["since_promotion"] == new  # every new run is later than the champion's last
    assert window["runs"] == max(math.ceil(0.2 * len(labelled)), new)
    _check_decision(record)
    _check_drift(record["drift"], champion.model.features, new, home)
    actuals = record["drift"]["actuals"]
    assert (actuals["lines"], actuals["invalid"], actuals["matched"]) == (5, 1, 3)
    assert actuals["unmatched"] == 1
    assert actuals["served"] == {"n": 1, "mape": 0.25}
    predicted = [predict_run(champion, Home(home).warehouse, r).p50_s for r in new_ids]
    expected = sum(abs(p - 20.0) / 20.0 for p in predicted) / 3
    assert actuals["metrics"]["mape"] == pytest.approx(expected, abs=1e-4)


def _check_decision(record: dict[str, Any]) -> None:
    """Promoted exactly when the challenger's MAPE is 2 % (relative) below the champion's."""
    ch, champ = (record[k]["window"]["mape"] for k in ("challenger", "champion"))
    better = (champ - ch) / champ >= record["margin"]
    assert record["decision"] == ("promoted" if better else "kept")
    assert record["version"] == ("v0002" if better else "v0001")
    said = REASON.fullmatch(record["reason"])
    assert said is not None and (said["needed"] if better else said["margin"]) == "2"


def _check_drift(drift: dict[str, Any], features: Sequence[str], new: int, home: Path) -> None:
    assert drift["new_runs"] == new and drift["new"]["n"] == new
    assert sorted(f["feature"] for f in drift["features"]) == sorted(features)
    assert all(f["psi"] >= 0 and f["level"] in ("stable", "moderate", "shifted")
               for f in drift["features"])  # fmt: skip
    assert sum(j["new_runs"] for j in drift["jobs"]) == new
    assert sum(j["holdout_runs"] for j in drift["jobs"]) == drift["holdout"]["n"]
    # the reported PSI is the evaluator's, between the champion's training era and the new runs
    top = drift["features"][0]
    specs = Registry(home).load("v0001", schema_fingerprint()).specs
    column = feature_values(Home(home).warehouse, specs)[top["feature"]]
    labelled = read_labelled(Home(home).warehouse)
    era, later = labelled[: len(labelled) - new], labelled[len(labelled) - new :]
    shift = psi([column.get(r[0]) for r in era], [column.get(r[0]) for r in later])
    assert top["psi"] == round(shift, 4)


# --------------------------------------------------------------------------- crashes


@pytest.mark.parametrize("step", ["run", "drift_report"])
def test_a_crash_before_the_pointer_write_leaves_the_champion_active(
    lab: Lab, home: Path, kb: KnowledgeBase, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, versions = active_bytes(home), len(Registry(home).versions())
    decisions = len(Registry(home).history())

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(nightly_module, step, crash)
    with pytest.raises(OSError, match="No space left"):
        night(lab.workspace, home, kb, margin=0.0)
    assert active_bytes(home) == before
    assert len(Registry(home).versions()) == versions
    assert len(Registry(home).history()) == decisions
    assert not (home / "nightly.lock").exists()
    failed = nightly_history(home)[-1]
    assert failed["status"] == "failed"
    assert failed["error"]["phase"] == {"run": "loop", "drift_report": "drift"}[step]
    assert "No space left" in failed["error"]["message"]


def test_a_window_larger_than_half_is_refused_and_recorded(lab: Lab, home: Path) -> None:
    before = active_bytes(home)
    args = ["nightly", "--workspace", str(lab.workspace), "--home", str(home), "--recent", "999"]
    result = runner.invoke(app, args)
    assert result.exit_code == EXIT_USER_ERROR
    assert "--recent 999: must be between 1 and" in result.output
    assert "Traceback" not in result.output
    assert active_bytes(home) == before
    assert nightly_history(home)[-1]["status"] == "failed"


def test_a_workspace_with_too_few_runs_is_one_line(lab: Lab, tmp_path: Path) -> None:
    small = lab_subset(lab.source, tmp_path / "small", lab.runs[:20])
    args = ["nightly", "--workspace", str(small), "--home", str(tmp_path / "home")]
    result = runner.invoke(app, args)
    assert result.exit_code == EXIT_USER_ERROR and "Traceback" not in result.output
    ingested = re.search(r"ingest: 20 new runs \((\d+) labelled\)", result.output)
    assert ingested is not None
    assert f"{ingested[1]} labelled runs are too few for a night: at least 60" in result.output
    assert nightly_history(tmp_path / "home")[-1]["error"]["phase"] == "champion"


def test_history_lists_every_night(first: NightlyResult) -> None:
    home = first.record["home"]
    result = runner.invoke(app, ["nightly", "--history", "--home", home, "--json"])
    assert result.exit_code == 0, result.output
    assert [r["stamp"] for r in json.loads(result.stdout)] == [first.folder.name]
    table = runner.invoke(app, ["nightly", "--history", "--home", home])
    assert first.folder.name in table.stdout and "no active model" in table.stdout
