"""The what-if rule: history perfect for the next rerun but wrong on a configuration held out.

On :mod:`tests.reruns_warehouse`, the job's last duration makes the time-ordered CV better
(reruns on one configuration) and the what-if score worse (on a held-out configuration it is
another hardware's duration); the input per core carries across. The evaluator must keep the
transferable feature and drop the history one, with the stage ``whatif``.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import duckdb
import pytest
from reruns_warehouse import LAST_SPEC, PER_CORE_SPEC, reruns_warehouse

from autofe.agents.analyze import proposed_feature
from autofe.agents.evaluate import RoundResult, best_whatif, evaluate_round
from autofe.agents.settings import EvalSettings
from autofe.agents.state import Feature, GateVerdict, Iteration
from autofe.agents.whatif import MaskedCache
from autofe.featurespec import FeatureSpec
from autofe.modeling.compute import compute_values
from autofe.sandbox.session import Sandbox
from autofe.warehouse.feature_store import write_feature

SPECS = (PER_CORE_SPEC, LAST_SPEC)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Feature]]:
    """The warehouse, a store with both features' values (as the extractor writes them), and
    the two features as gated candidates."""
    root = tmp_path_factory.mktemp("whatif")
    db = reruns_warehouse(root / "warehouse.duckdb")
    store = root / "features.duckdb"
    with Sandbox.open(db) as box:
        values = compute_values(box, SPECS)
    for spec in SPECS:
        write_feature(store, spec, list(values[spec.name].items()), 1.0)
    return db, store, [accepted(s) for s in SPECS]


def accepted(spec: FeatureSpec) -> Feature:
    verdict = GateVerdict(
        feature_id=spec.feature_id, accepted=True, gate="", reasons=[], coverage=1.0
    )
    return {**proposed_feature(spec, "test"), "gate": verdict}


@pytest.fixture(scope="module")
def judged(workspace: tuple[Path, Path, list[Feature]]) -> tuple[RoundResult, MaskedCache]:
    db, store, features = workspace
    cache = MaskedCache()
    return evaluate_round(db, store, [], features, 0, None, EvalSettings(), cache=cache), cache


def test_history_perfect_in_time_is_dropped_by_the_what_if_rule(
    workspace: tuple[Path, Path, list[Feature]], judged: tuple[RoundResult, MaskedCache]
) -> None:
    db, store, features = workspace
    result, _ = judged
    assert [k["name"] for k in result.kept] == ["input_mb_per_core"]
    (drop,) = result.dropped
    assert (drop["name"], drop["stage"]) == ("last_duration_s", "whatif")
    assert drop["reason"].startswith("what-if MAPE")
    # the time-ordered rule alone keeps it: it is the better feature for the next rerun
    time_only = EvalSettings(whatif_tolerance=math.inf)
    both = evaluate_round(db, store, [], features, 0, None, time_only)
    assert [k["name"] for k in both.kept] == ["input_mb_per_core", "last_duration_s"]
    assert both.cv.r2 > result.cv.r2 and math.isnan(both.whatif_mape)
    assert result.feedback["whatif"] == {"mape": round(result.whatif_mape, 4), "folds": 3}


def test_the_history_makes_the_what_if_score_worse_beyond_the_tolerance(
    judged: tuple[RoundResult, MaskedCache],
) -> None:
    result, _ = judged
    (drop,) = result.dropped
    with_it = float(drop["reason"].split()[2])
    assert with_it > result.whatif_mape + EvalSettings().whatif_tolerance
    assert 0.0 < result.whatif_mape < 1.0


def test_a_later_round_computes_only_its_new_candidates(
    workspace: tuple[Path, Path, list[Feature]], judged: tuple[RoundResult, MaskedCache]
) -> None:
    """The kept feature's masked values are served from the cache; the best what-if score so
    far is the reference, and a round with nothing new keeps the set and its score."""
    db, store, _ = workspace
    result, cache = judged
    computed = cache.computed
    assert computed == 2 * 3  # two features on three folds
    copy = MaskedCache(dict(cache.values), cache.computed)
    record = Iteration(whatif_mape=result.whatif_mape)  # type: ignore[typeddict-item]
    again = evaluate_round(
        db, store, result.kept, [], 1, result.cv.r2, EvalSettings(),
        best_whatif=best_whatif([record]), cache=copy,
    )  # fmt: skip
    assert copy.computed == computed
    assert (again.kept, again.dropped) == ([], [])
    assert again.whatif_mape == result.whatif_mape


def test_one_configuration_has_no_what_if_score(tmp_path: Path) -> None:
    db = reruns_warehouse(tmp_path / "w.duckdb")
    one = tmp_path / "one.duckdb"
    shutil.copyfile(db, one)
    with duckdb.connect(str(one)) as con:
        con.execute("UPDATE runs SET cluster_config_id = 'c1'")
    store = tmp_path / "features.duckdb"
    with Sandbox.open(one) as box:
        values = compute_values(box, SPECS)
    for spec in SPECS:
        write_feature(store, spec, list(values[spec.name].items()), 1.0)
    result = evaluate_round(one, store, [], [accepted(s) for s in SPECS], 0, None)
    assert math.isnan(result.whatif_mape) and result.feedback["whatif"]["folds"] == 0
    assert {k["name"] for k in result.kept} <= {s.name for s in SPECS}
