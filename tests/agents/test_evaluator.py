"""The evaluator on real data: the example warehouse and a store of gated, materialised features."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest

from autofe.agents import evaluate
from autofe.agents.analyze import proposed_feature
from autofe.agents.evaluate import RoundResult, evaluate_round, training_runs
from autofe.agents.settings import EvalSettings
from autofe.agents.state import Feature, GateVerdict
from autofe.errors import WarehouseError
from autofe.evals.manual import manual_features
from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import Dataset, labelled_runs
from autofe.modeling.evaluate import cross_validate
from autofe.modeling.psi import psi
from autofe.modeling.quality import quality_issue
from autofe.modeling.train import fit
from autofe.sandbox.session import Sandbox
from autofe.tools.materialize_feature import MaterializeResult, gate_context, materialize_feature
from autofe.warehouse.feature_store import read_store_values

# manual features with real values on the example (neither constant nor duplicates)
GOOD = (
    "cal_weekend",
    "cfg_aqe_enabled",
    "cfg_broadcast_threshold_mb",
    "cfg_driver_memory_gb",
    "cfg_hourly_price",
    "cfg_node_type",
    "cfg_shuffle_partitions",
    "cfg_total_cores",
    "hist_days_since_prev_run",
    "hist_failed_share",
    "job_schedule",
    "script_num_statements",
)
DRIFTING = "size_input_files"  # data grows over the month: PSI ≈ 5.8 between the halves
EXTRA = (
    FeatureSpec(
        name="constant_one", sql="SELECT run_id, 1.0 AS value FROM runs", category="calendar"
    ),
    FeatureSpec(
        name="noise_hash",
        sql="SELECT run_id, hash(run_id) % 1000 AS value FROM runs",
        category="static-config",
    ),
    FeatureSpec(
        name="noise_hash_salted",
        sql="SELECT run_id, hash(run_id || 'salt') % 1000 AS value FROM runs",
        category="static-config",
    ),
)
NOISE = ("noise_hash", "noise_hash_salted")
SETTINGS = EvalSettings(psi_max=0.25)  # the stability screen on (it is off by default)


def gated(spec: FeatureSpec, verdict: GateVerdict) -> Feature:
    return {**proposed_feature(spec, "manual"), "gate": verdict}


def verdict(result: MaterializeResult) -> GateVerdict:
    return GateVerdict(
        feature_id=result.feature_id,
        accepted=result.accepted,
        gate=result.reasons[0].gate if result.reasons else "",
        reasons=[r.message for r in result.reasons],
        coverage=result.coverage,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path) -> Path:
    return tmp_path_factory.mktemp("evaluator") / "features.duckdb"


@pytest.fixture(scope="module")
def features(example_warehouse: Path, store: Path) -> dict[str, Feature]:
    """Every test feature gated and materialised into ``store`` (all pass the gates)."""
    manual = {s.name: s for s in manual_features()}
    specs = [manual[n] for n in (*GOOD, DRIFTING)] + list(EXTRA)
    out: dict[str, Feature] = {}
    with Sandbox.open(example_warehouse) as box:
        ctx = gate_context(example_warehouse, box)
        for spec in specs:
            result = materialize_feature(spec, ctx, box, store)
            assert result.accepted, (spec.name, result.reasons)
            out[spec.name] = gated(spec, verdict(result))
    return out


def pick(features: dict[str, Feature], names: Sequence[str]) -> list[Feature]:
    return [features[n] for n in names]


def rejected_by_gate() -> Feature:
    spec = FeatureSpec(name="leaky", sql="SELECT run_id, duration_s FROM runs", category="history")
    result = GateVerdict(
        feature_id=spec.feature_id,
        accepted=False,
        gate="leakage",
        reasons=["reads the label"],
        coverage=None,
    )
    return gated(spec, result)


def first_round(db: Path, store: Path, features: dict[str, Feature]) -> RoundResult:
    new = [*pick(features, (*GOOD, DRIFTING, "constant_one")), rejected_by_gate()]
    return evaluate_round(db, store, [], new, 1, None, SETTINGS)


@pytest.fixture(scope="module")
def first(example_warehouse: Path, store: Path, features: dict[str, Feature]) -> RoundResult:
    return first_round(example_warehouse, store, features)


@pytest.fixture(scope="module")
def second(
    example_warehouse: Path, store: Path, features: dict[str, Feature], first: RoundResult
) -> RoundResult:
    """Only noise, plus a second proposal of a feature already kept."""
    again = next(f for f in pick(features, GOOD) if f["name"] == first.kept[0]["name"])
    new = [*pick(features, NOISE), again]
    return evaluate_round(example_warehouse, store, first.kept, new, 2, first.cv.r2, SETTINGS)


def stages(result: RoundResult) -> dict[str, str]:
    return {d["name"]: d["stage"] for d in result.dropped}


def test_useless_and_drifting_features_are_screened_out(first: RoundResult) -> None:
    dropped = {d["name"]: d for d in first.dropped}
    assert dropped["constant_one"]["stage"] == "quality"
    assert dropped["constant_one"]["reason"].startswith("constant")
    assert dropped[DRIFTING]["stage"] == "stability"
    assert "PSI" in dropped[DRIFTING]["reason"]
    # the gate-rejected candidate is the caller's business: neither kept nor dropped here
    assert "leaky" not in dropped and "leaky" not in {k["name"] for k in first.kept}


@pytest.fixture(scope="module")
def labelled(example_warehouse: Path) -> list[str]:
    """The example's labelled runs in submit order (the holdout is their latest fifth)."""
    with duckdb.connect(str(example_warehouse), read_only=True) as con:
        return [r[0] for r in labelled_runs(con)]


@pytest.fixture(scope="module")
def scored_runs(labelled: list[str]) -> int:
    """Runs the time-ordered CV scores: the second half of the training runs."""
    train = round(len(labelled) * 0.8)
    return train - train // 2


def test_first_round_keeps_features_with_gain_and_scores_them(
    first: RoundResult, scored_runs: int
) -> None:
    kept = {k["name"]: k for k in first.kept}
    assert len(kept) >= 3 and set(kept) <= set(GOOD)
    verdicts = [k["evaluation"] for k in first.kept]
    assert sum(v["importance"] for v in verdicts) == pytest.approx(1.0, abs=1e-4)
    assert all(v["importance"] > 0 and v["iteration"] == 1 for v in verdicts)
    assert all(0 <= v["psi"] <= SETTINGS.psi_max for v in verdicts)
    # each GOOD feature is kept, or dropped for drift or lack of gain: nothing else can happen
    assert {n for n, s in stages(first).items() if n in GOOD} == set(GOOD) - set(kept)
    assert all(s in {"lift", "stability"} for n, s in stages(first).items() if n in GOOD)
    assert first.cv.n == scored_runs  # the first half of the training runs only ever trains
    assert math.isfinite(first.cv.r2)


def test_a_round_of_noise_does_not_lower_the_score(first: RoundResult, second: RoundResult) -> None:
    assert second.cv.r2 >= first.cv.r2 - SETTINGS.tolerance
    kept = {k["name"] for k in second.kept}
    assert kept <= set(NOISE)
    assert all(stages(second)[n] == "lift" for n in set(NOISE) - kept)
    if not kept:  # the previous set stands, with exactly its score
        assert second.cv == first.cv
    assert stages(second)[first.kept[0]["name"]] == "quality"  # proposed again: a duplicate


def test_an_unreachable_best_keeps_the_previous_set(
    example_warehouse: Path, store: Path, features: dict[str, Feature], first: RoundResult
) -> None:
    best = first.cv.r2 + 1.0
    new = pick(features, NOISE)
    result = evaluate_round(example_warehouse, store, first.kept, new, 2, best, SETTINGS)
    assert result.kept == []
    assert set(stages(result)) == set(NOISE) and set(stages(result).values()) == {"lift"}
    assert result.cv == first.cv
    top = [f["name"] for f in result.feedback["top_features"]]
    assert set(top) <= {k["name"] for k in first.kept}
    assert len(top) == min(len(first.kept), 10)


def test_the_holdout_tail_is_never_used(
    example_warehouse: Path,
    store: Path,
    features: dict[str, Feature],
    labelled: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    head = tuple(labelled[: round(len(labelled) * 0.8)])
    assert len(labelled) >= 390 and len(head) == round(len(labelled) * 0.8)
    assert tuple(r[0] for r in training_runs(example_warehouse, SETTINGS)) == head
    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(evaluate, "fit", spy(fit, seen))
    monkeypatch.setattr(evaluate, "cross_validate", spy(cross_validate, seen))
    evaluate_round(example_warehouse, store, [], pick(features, GOOD[:4]), 1, None, SETTINGS)
    assert seen and all(ids == head for ids in seen)


def spy(real: Any, seen: list[tuple[str, ...]]) -> Any:
    def wrapper(data: Dataset, *args: Any) -> Any:
        seen.append(data.run_ids)
        return real(data, *args)

    return wrapper


def test_feedback_has_the_documented_keys_and_is_json(
    first: RoundResult, second: RoundResult, scored_runs: int
) -> None:
    for result in (first, second):
        fb = json.loads(json.dumps(result.feedback, allow_nan=False))
        assert set(fb) == {"worst_jobs", "worst_buckets", "top_features", "dropped", "cv", "whatif"}
        assert fb["cv"] == {
            "r2": round(result.cv.r2, 4),
            "mape": round(result.cv.mape, 4),
            "n": scored_runs,
        }
        assert 0 < len(fb["worst_jobs"]) <= 5
        assert set(fb["worst_jobs"][0]) == {"job_id", "job_name", "mape", "runs"}
        assert all(j["job_name"] for j in fb["worst_jobs"])
        mapes = [j["mape"] for j in fb["worst_jobs"]]
        assert mapes == sorted(mapes, reverse=True)
        assert sum(b["runs"] for b in fb["worst_buckets"]) == scored_runs
        assert {b["bucket"] for b in fb["worst_buckets"]} <= set(evaluate.BUCKETS)
        assert all(set(f) == {"name", "importance", "category"} for f in fb["top_features"])
        assert len(fb["dropped"]) == len(result.dropped)
    assert {d["name"] for d in first.feedback["dropped"]} >= {"constant_one", DRIFTING}


def test_same_inputs_same_result(
    example_warehouse: Path, store: Path, features: dict[str, Feature], first: RoundResult
) -> None:
    again = first_round(example_warehouse, store, features)
    assert (again.kept, again.dropped, again.cv, again.feedback) == (
        first.kept,
        first.dropped,
        first.cv,
        first.feedback,
    )


def test_store_values_by_feature_and_run(
    example_warehouse: Path, store: Path, features: dict[str, Feature]
) -> None:
    node_type = features["cfg_node_type"]["gate"]["feature_id"]
    total_cores = features["cfg_total_cores"]["gate"]["feature_id"]
    values = read_store_values(store, [node_type, total_cores, "0000000000000000"])
    assert values["0000000000000000"] == {}
    with duckdb.connect(str(example_warehouse), read_only=True) as con:
        (runs,) = con.execute("SELECT count(*) FROM runs").fetchone() or (0,)
    assert len(values[node_type]) == len(values[total_cores]) == runs
    assert all(isinstance(v, str) for v in values[node_type].values())
    assert all(isinstance(v, float) for v in values[total_cores].values())


def test_a_missing_store_or_warehouse_is_named(
    example_warehouse: Path, store: Path, tmp_path: Path
) -> None:
    with pytest.raises(WarehouseError, match=r"nowhere\.duckdb"):
        read_store_values(tmp_path / "nowhere.duckdb", ["x"])
    with pytest.raises(WarehouseError, match=r"no-warehouse\.duckdb"):
        evaluate_round(tmp_path / "no-warehouse.duckdb", store, [], [], 1, None)


def test_a_round_in_which_nothing_passed_the_gates_is_a_result_not_a_crash(
    example_warehouse: Path, tmp_path: Path
) -> None:
    """Nothing gated before anything was kept: no store was ever written (issue #32)."""
    refused = Feature(
        name="model_id",
        sql="model_id",
        category="history",
        value_type="DOUBLE",
        rationale="",
        kb_refs=[],
        origin="llm",
        gate=GateVerdict(
            feature_id="", accepted=False, gate="tool", reasons=["refused"], coverage=None
        ),
    )
    result = evaluate_round(example_warehouse, tmp_path / "nowhere.duckdb", [], [refused], 0, None)
    assert (result.kept, result.dropped, result.cv.n) == ([], [], 0)
    assert result.feedback["cv"] == {"r2": None, "mape": None, "n": 0}


def test_psi_is_zero_for_the_same_distribution_and_large_for_a_shift() -> None:
    values = [float(i % 37) for i in range(400)]
    assert psi(values, list(reversed(values))) == pytest.approx(0.0, abs=1e-9)
    assert psi(values, [v + 20.0 for v in values]) > 0.25
    assert psi(["a", "b", "c"] * 30, ["c", "b", "a"] * 30) == pytest.approx(0.0, abs=1e-9)
    assert psi(["a", "b"] * 40, ["b", "c"] * 40) > 0.25
    assert psi([1.0, None, 2.0], [None, None]) == 0.0  # no values on one side: no evidence


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"a": 1.0, "b": 2.0, "c": None}, None),
        ({"a": 1.0}, "coverage 0.33 below 0.50"),
        ({"a": 1.0, "b": math.nan, "c": 2.0}, "1 NaN or infinite"),
        ({"a": 1.0, "b": math.inf, "c": 2.0}, "1 NaN or infinite"),
        ({"a": "x", "b": "x", "c": "x"}, "constant: every training run has 'x'"),
        ({"a": "x", "b": "y"}, None),
        ({"d": 1.0, "e": 2.0}, None),  # job k's own parameter: all of its runs have one
        ({"d": 1.0}, "constant"),  # half of k's runs are enough
        ({"a": 1.0, "d": 2.0}, "coverage 0.40"),
    ],
)
def test_quality_issue(values: dict[str, Any], expected: str | None) -> None:
    jobs = {"a": "j", "b": "j", "c": "j", "d": "k", "e": "k"}
    issue = quality_issue(values, jobs, 0.5)
    assert issue == expected if expected is None else (issue or "").startswith(expected)
