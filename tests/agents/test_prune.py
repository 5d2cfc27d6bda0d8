"""The final pruning on a real run: the example's one-round catalog, pruned by importance on
the CV folds, and the account ``metrics.json`` gives of it."""

from __future__ import annotations

import json
from pathlib import Path

from autofe.agents.prune import LEVELS, importance_head
from autofe.agents.settings import EvalSettings
from autofe.feature_catalog import load_catalog
from autofe.modeling.artifact import load_model
from autofe.warehouse.connect import schema_fingerprint


def test_the_shipped_catalog_is_the_head_the_pruning_kept(example_run: Path) -> None:
    metrics = json.loads((example_run / "metrics.json").read_text())
    pruning = metrics["pruning"]
    shipped = load_catalog(example_run / "features")
    model = load_model(example_run, schema_fingerprint()).model
    assert pruning["after"] == len(shipped) == metrics["accepted"] <= pruning["before"]
    assert set(model.features) == {s.name for s in shipped}
    pruned = pruning["before"] - pruning["after"]
    assert metrics["rejected_by_stage"].get("prune", 0) == pruned


def test_a_smaller_head_is_kept_only_when_it_scores_no_worse(example_run: Path) -> None:
    metrics = json.loads((example_run / "metrics.json").read_text())
    pruning = metrics["pruning"]
    whole, tried = pruning["whole"], pruning["tried"]
    last = metrics["iterations"][-1]  # the last round scored exactly the kept set
    assert whole["features"] == last["features"] == pruning["before"]
    assert (whole["cv_r2"], whole["cv_mape"]) == (
        round(last["cv_r2"], 6),
        round(last["cv_mape"], 6),
    )
    settings = EvalSettings()
    assert tried, "the example's catalog has smaller heads to try"
    assert [t["level"] for t in tried] == sorted(t["level"] for t in tried)
    assert all(t["level"] in LEVELS and t["features"] < whole["features"] for t in tried)
    for t in tried:
        no_worse = (
            t["cv_r2"] >= whole["cv_r2"] - settings.tolerance
            and t["cv_mape"] <= whole["cv_mape"] + settings.whatif_tolerance
            and (t["whatif_mape"] or 0.0)
            <= (whole["whatif_mape"] or 0.0) + settings.whatif_tolerance
        )
        assert (t["verdict"] == "kept") == no_worse, t
    kept = [t for t in tried if t["verdict"] == "kept"]
    assert len(kept) <= 1 and (not kept or kept[0] is tried[-1])  # the first that holds
    assert pruning["after"] == (kept[0]["features"] if kept else pruning["before"])


def test_the_head_is_the_fewest_features_that_carry_the_share() -> None:
    shares = {"a": 0.4, "b": 0.4, "c": 0.15, "d": 0.04, "e": 0.01, "f": 0.0}
    assert importance_head(shares, 0.8) == ("a", "b")
    assert importance_head(shares, 0.9) == ("a", "b", "c")
    assert importance_head(shares, 0.99) == ("a", "b", "c", "d")
    assert importance_head(shares, 0.995) == ("a", "b", "c", "d", "e")
    assert importance_head(dict.fromkeys("xy", 0.0), 0.9) == ("x", "y")  # no gain: all stay
