"""The retraining loop end to end on the shipped example workspace (issue #31's replay).

The champion is the first night's model on the first 300 runs. The scheduled nightly P2
retraining is requested first (spot, due by the next night). The later 190 runs are replayed
in submit order through ``POST /v1/predict`` and ``POST /v1/actuals`` (``tests/pipelines/
replay.py``). Unshifted, nothing may fire over the whole replay nor after the scheduled
night. Shifted, one job — ``customer_spend_rank``, 13 of the 186 replayed runs, which the
champion predicts within 12 % before the shift — takes three times as long from run
:data:`SHIFT_AT` on: the degradation trigger must fire by that job's third slow run and raise
the queued P2 to P0 on demand, and the night that runs it (``autofe nightly --handle``) must
promote a challenger whose predictions of the job's later runs are far better than the
champion's. A caller sending a feature in other units must fire skew after the night that
ingests the runs it was sent for. Marked slow (four nights and seven feature passes, 150 s
on two cores): ``make test-triggers`` runs it, and CI does.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import replay
from fastapi.testclient import TestClient

from autofe.agents.settings import EvalSettings, LoopSettings, Targets
from autofe.config import example_workspace
from autofe.knowledge_base.embeddings import HashingEmbedder
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.modeling.artifact import Artifact
from autofe.modeling.dataset import FeatureValues
from autofe.pipelines.home import Home
from autofe.pipelines.nightly import NightlySettings, nightly
from autofe.pipelines.serve import create_app
from autofe.pipelines.triggers import check_triggers, read_triggers
from autofe.scheduler.store import JobStore
from autofe.warehouse.connect import schema_fingerprint

pytestmark = pytest.mark.slow

JOB = "customer_spend_rank"
SHIFT_AT = 370
"""Replay index (of 490 runs in start order) from which the job is three times slower."""
SKEW_AT = 300
"""Replay index from which the caller sends a feature in other units."""
LOOP = LoopSettings(
    Targets(r2=2.0, mape=None),  # unreachable: the round count decides
    max_iterations=1,
    budget_seconds=900.0,  # a safety stop only
    per_round=30,
    evaluation=EvalSettings(folds=3),
)


@dataclass
class Replayed:
    """What one replay did: every served actual, and the firings after each."""

    home: Home
    runs: list[Path]
    errors: dict[int, float]
    """Replay index → the served prediction's absolute percentage error."""
    fired: dict[int, list[dict[str, Any]]]

    def runs_after(self, index: int, shift: replay.Shift) -> list[int]:
        """The shifted job's successful runs after ``index``."""
        return [
            i
            for i in range(index + 1, len(self.runs))
            if replay.factor_of(self.runs, i, shift) != 1.0
            and json.loads(self.runs[i].read_text())["state"].get("result_state") == "SUCCESS"
        ]


@pytest.fixture(scope="module")
def runs() -> list[Path]:
    source = example_workspace() / "runs"
    return sorted(
        source.glob("*.json"), key=lambda p: (json.loads(p.read_text())["start_time"], p.name)
    )


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    return KnowledgeBase(index_dir=tmp_path_factory.mktemp("kb"), embedder=HashingEmbedder())


@pytest.fixture(scope="module")
def champion(runs: list[Path], kb: KnowledgeBase, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home after its first night on the first 300 runs (no shift before them)."""
    tmp = tmp_path_factory.mktemp("champion")
    workspace = replay.workspace(example_workspace(), tmp / "ws", runs, replay.FIRST)
    record = nightly(NightlySettings(workspace, tmp / "home", loop=LOOP), kb=kb).record
    assert record["decision"] == "promoted"
    return tmp / "home"


def stream(
    home: Home,
    runs: Sequence[Path],
    values: FeatureValues,
    start: int,
    shift: replay.Shift | None,
    stop_at_p0: bool = True,
) -> Replayed:
    """Serve and report runs from ``start`` on; stop after the first P0 firing (when told)."""
    client = TestClient(create_app(home.root, token="", poll_s=0))
    replayed = Replayed(home, list(runs), {}, {})
    seen = len(read_triggers(home.triggers))
    for i in range(start, len(runs)):
        run = json.loads(runs[i].read_text())
        if run["state"].get("result_state") != "SUCCESS":
            continue
        run_id, job_id = str(run["run_id"]), str(run["job_id"])
        features = {k: v.get(run_id) for k, v in values.items()}
        served = replay.predict(client, run_id, job_id, features)
        factor = replay.factor_of(runs, i, shift)
        seconds = run["execution_duration"] * factor / 1000.0
        replay.report(client, run_id, job_id, seconds, replay.finished_at(run, factor))
        replayed.errors[i] = abs(served["p50_s"] - seconds) / seconds
        firings = read_triggers(home.triggers)[seen:]
        seen += len(firings)
        if firings:
            replayed.fired[i] = firings
        if stop_at_p0 and any(f["tier"] == "P0" for f in firings):
            break
    return replayed


def copy_home(source: Path, dest: Path) -> Home:
    return Home(Path(shutil.copytree(source, dest)))


def artifact_of(home: Home, name: str) -> Artifact:
    return home.registry.load(name, schema_fingerprint())


def served_values(
    home: Home,
    name: str,
    runs: Sequence[Path],
    finished: int,
    shift: replay.Shift | None,
    tmp: Path,
) -> FeatureValues:
    """Version ``name``'s features of the later runs, as served after ``finished`` runs."""
    specs = artifact_of(home, name).specs
    return replay.served_features(example_workspace(), tmp, runs, finished, specs, shift)


def run_night(
    home: Home,
    runs: Sequence[Path],
    finished: int,
    shift: replay.Shift | None,
    request: dict[str, Any],
    kb: KnowledgeBase,
    tmp: Path,
) -> dict[str, Any]:
    """What the scheduler's runner does with the request: ``autofe nightly --handle``, on
    the workspace as it stands (the first ``finished`` runs ended)."""
    workspace = replay.workspace(example_workspace(), tmp, runs, finished, shift=shift)
    settings = NightlySettings(
        workspace, home.root, loop=LOOP, mode=request["mode"], handle=request["handle"]
    )
    return nightly(settings, kb=kb).record


def test_nothing_fires_on_the_unshifted_replay(
    champion: Path, runs: list[Path], kb: KnowledgeBase, tmp_path: Path
) -> None:
    """Every replayed actual, then the scheduled night on all 490 runs and its checks."""
    home = copy_home(champion, tmp_path / "home")
    (scheduled,) = check_triggers(home.root, scheduled=True)
    values = served_values(home, "v0001", runs, replay.FIRST, None, tmp_path / "serve")
    replayed = stream(home, runs, values, replay.FIRST, None)
    assert len(replayed.errors) == 186  # every successful replayed run, served and reported
    assert replayed.fired == {}
    overall = mean(replayed.errors.values())
    served = f"MAPE {overall:.3f}, median APE {median(replayed.errors.values()):.3f}"
    print(f"unshifted replay: {len(replayed.errors)} actuals, served {served}")
    shipped = replay.shipped_baselines(
        example_workspace(), tmp_path / "all", runs, None, list(replayed.errors)
    )
    for name, errors in {
        **replay.baseline_errors(runs, list(replayed.errors), None),
        **shipped,
    }.items():
        print(f"  {name}: MAPE {mean(errors):.3f}, median APE {median(errors):.3f} (same runs)")
    record = run_night(home, runs, len(runs), None, scheduled, kb, tmp_path / "ws2")
    print(f"the scheduled night: {record['decision']}: {record['reason']}")
    assert [r["subject"] for r in read_triggers(home.triggers)] == [scheduled["subject"]]
    assert JobStore.in_home(home.root).get(scheduled["handle"]).state == "succeeded"


def test_a_caller_sending_a_feature_in_other_units_fires_skew_after_the_night(
    champion: Path, runs: list[Path], kb: KnowledgeBase, tmp_path: Path
) -> None:
    """From run :data:`SKEW_AT` on, the caller sends the model's most important numeric
    feature a thousand times too large (a unit slip). The night that ingests those runs
    compares what was served with what the warehouse computes for the same runs: skew, P1."""
    home = copy_home(champion, tmp_path / "home")
    (home.root / "triggers.json").write_text('{"min_served": 100}')  # 186 runs are replayed
    (scheduled,) = check_triggers(home.root, scheduled=True)
    artifact = artifact_of(home, "v0001")
    values = dict(served_values(home, "v0001", runs, replay.FIRST, None, tmp_path / "serve"))
    top = replay.top_numeric_feature(artifact, values)
    after = {str(json.loads(r.read_text())["run_id"]) for r in runs[SKEW_AT:]}
    values[top] = {
        run: v * 1000.0 if run in after and isinstance(v, int | float) else v
        for run, v in values[top].items()
    }
    replayed = stream(home, runs, values, replay.FIRST, None, stop_at_p0=False)
    request = [r for r in read_triggers(home.triggers) if r["handle"] == scheduled["handle"]][-1]
    record = run_night(home, runs, len(runs), None, request, kb, tmp_path / "ws2")
    assert record["decision"] == "kept", record["reason"]
    skews = [r for r in read_triggers(home.triggers) if r["kind"] == "skew"]
    (fired,) = skews
    assert (fired["tier"], fired["source"], fired["action"]) == ("P1", "nightly", "submitted")
    assert top in fired["evidence"]["shifted"]
    served = mean(replayed.errors.values())
    print(f"skew on {top}: {fired['reason']}")
    print(f"served MAPE {served:.3f}, {len(replayed.fired)} firings on actuals")


@pytest.mark.xfail(
    strict=True,
    reason=(
        "issue #28, open: since the anchored model and the round-0 history recipes (commits "
        "0ddb6e2..c8ee398) the P0 still fires on the job's third slow run and the night runs, "
        "but its challenger is not 2 % better over the window (25.5 % against 25.8 %), so the "
        "champion is kept, and it stays at 65 % MAPE on the job's later slow runs, where the "
        "run-by-run job x configuration median scores 28.6 %"
    ),
)
def test_a_slowed_job_fires_p0_and_the_promoted_challenger_fixes_it(
    champion: Path, runs: list[Path], kb: KnowledgeBase, tmp_path: Path
) -> None:
    shift = replay.Shift(JOB, SHIFT_AT)
    home = copy_home(champion, tmp_path / "home")
    (scheduled,) = check_triggers(home.root, scheduled=True)
    assert (scheduled["tier"], scheduled["action"], scheduled["plan"]["market"]) == (
        "P2",
        "submitted",
        "spot",
    )
    stale = served_values(home, "v0001", runs, replay.FIRST, shift, tmp_path / "serve1")
    replayed = stream(home, runs, stale, replay.FIRST, shift)
    shifted = replayed.runs_after(SHIFT_AT - 1, shift)
    (fired_at,) = replayed.fired  # nothing fired before the job went wrong
    (p0,) = replayed.fired[fired_at]
    assert (p0["kind"], p0["subject"], p0["tier"]) == ("degradation", "job:103", "P0")
    assert (p0["action"], p0["handle"]) == ("retiered", scheduled["handle"])
    assert p0["plan"]["market"] == "on-demand"
    waited = [i for i in replayed.errors if shifted[0] <= i <= fired_at]
    assert fired_at in shifted[:3] and len(waited) <= 20  # its third slow run at the latest
    print(f"shifted from run {shifted[0]}; fired at run {fired_at}, {len(waited)} actuals later")

    record = run_night(home, runs, fired_at + 1, shift, p0, kb, tmp_path / "ws2")
    assert record["decision"] == "promoted", record["reason"]
    assert JobStore.in_home(home.root).get(p0["handle"]).state == "succeeded"
    assert home.registry.active().name == "v0002"  # type: ignore[union-attr]

    later = [i for i in replayed.runs_after(fired_at, shift)]
    report_numbers(home, runs, stale, later, shift, fired_at, tmp_path)


def report_numbers(
    home: Home,
    runs: Sequence[Path],
    stale: FeatureValues,
    later: Sequence[int],
    shift: replay.Shift,
    fired_at: int,
    tmp: Path,
) -> None:
    """The challenger against the champion on the job's shifted runs after the retraining."""
    fresh_new = served_values(home, "v0002", runs, fired_at + 1, shift, tmp / "serve2")
    fresh_old = served_values(home, "v0001", runs, fired_at + 1, shift, tmp / "serve3")
    champion, challenger = artifact_of(home, "v0001"), artifact_of(home, "v0002")
    scores = {
        "champion, features as served before the night": replay.version_errors(
            champion, stale, runs, later, shift
        ),
        "champion, features after the night's ingest": replay.version_errors(
            champion, fresh_old, runs, later, shift
        ),
        "challenger": replay.version_errors(challenger, fresh_new, runs, later, shift),
        **replay.baseline_errors(runs, later, shift),
        **replay.shipped_baselines(example_workspace(), tmp / "all", runs, shift, later),
    }
    for name, errors in scores.items():
        apes = f"MAPE {mean(errors):.3f}, median APE {median(errors):.3f}"
        print(f"{name}: {apes} on {len(errors)} shifted runs")
    best_champion = min(mean(scores[k]) for k in list(scores)[:2])
    assert mean(scores["challenger"]) <= 0.7 * best_champion


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def mean(values: Iterable[float]) -> float:
    found = list(values)
    return sum(found) / len(found)
