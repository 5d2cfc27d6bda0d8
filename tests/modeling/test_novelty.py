"""Which runs are new to their job's history, and the intervals calibrated on such runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autofe.evals.manual import manual_features
from autofe.modeling.compute import feature_matrix
from autofe.modeling.conformal import MIN_GROUP, Calibration
from autofe.modeling.evaluate import evaluate_holdout
from autofe.modeling.metrics import coverage
from autofe.modeling.novelty import NOVELTY_SQL, labelled_novelty, novel_runs, run_novelty
from autofe.sandbox.session import Sandbox


def test_a_run_is_familiar_only_once_a_run_on_its_settings_has_finished() -> None:
    rows = [
        # run, job, submitted, ended, configuration, node type, script version
        ("a", "j", 0, 10, "c1", "n1", "s1"),
        ("b", "j", 1, 11, "c1", "n1", "s1"),  # submitted while a runs: nothing finished yet
        ("c", "j", 12, 20, "c1", "n1", "s1"),  # a and b have finished
        ("d", "j", 21, 30, "c2", "n1", "s1"),  # another configuration
        ("e", "j", 31, 40, "c1", "n2", "s1"),  # a new node type
        ("f", "j", 41, 50, "c1", "n1", "s2"),  # a new script version
        ("g", "k", 51, 60, "c1", "n1", "s1"),  # another job's history does not count
        ("h", "j", 61, 70, "c2", "n1", "s2"),  # every setting seen by now
        ("i", "j", 71, 80, "c2", "n2", "s1"),  # each seen, though never together
    ]
    assert novel_runs(rows) == {
        "a": True,
        "b": True,
        "c": False,
        "d": True,
        "e": True,
        "f": True,
        "g": True,
        "h": False,
        "i": False,
    }


def test_a_run_alone_is_judged_as_in_the_whole_history(example_warehouse: Path) -> None:
    with Sandbox.open(example_warehouse) as sandbox:
        every = labelled_novelty(sandbox)
        order = [str(r[0]) for r in sandbox.query(NOVELTY_SQL).rows]
        picked = order[:: max(1, len(order) // 60)]
        alone = {run: run_novelty(sandbox, run) for run in picked}
    assert alone == {run: every[run] for run in picked}
    assert 0 < sum(every.values()) < len(every)  # the example has both kinds


def test_novel_runs_get_intervals_from_novel_calibration_runs() -> None:
    rng = np.random.default_rng(0)
    n = 4 * MIN_GROUP
    novel = np.arange(n) % 2 == 0
    residuals = np.where(novel, 1.0, 0.1) * rng.uniform(0.5, 1.0, n)
    folds = np.zeros(n, dtype=np.intp)
    calibration = Calibration.fit(residuals, np.zeros(n), folds, ["j"] * n, novel.tolist())
    centre = np.zeros(1)
    novel_low, novel_high = calibration.bounds(centre, 0.8, "j", novel=True)
    rerun_low, rerun_high = calibration.bounds(centre, 0.8, "j", novel=False)
    assert novel_high > 0.9 and novel_low < -0.9  # the novel residuals' quantile
    assert (rerun_low, rerun_high) == calibration.bounds(centre, 0.8, "j")  # every run's
    assert rerun_high < novel_high
    too_few = novel & (np.arange(n) < 2 * (MIN_GROUP - 1))
    pooled = Calibration.fit(residuals, np.zeros(n), folds, ["j"] * n, too_few.tolist())
    assert pooled.novel is None
    assert pooled.bounds(centre, 0.8, "j", novel=True) == pooled.bounds(centre, 0.8, "j")


def test_on_the_example_novel_holdout_runs_are_covered_better_and_reruns_alike(
    example_warehouse: Path,
) -> None:
    data = feature_matrix(example_warehouse, manual_features())
    assert data.novel is not None
    cut = round(len(data) * 0.8)
    apart = evaluate_holdout(data, cut)
    pooled = evaluate_holdout(replace(data, novel=None), cut)
    assert apart.predicted.tolist() == pooled.predicted.tolist()
    new = data.novel[cut:]
    assert new.any() and not new.all()

    def covered(e: object, rows: np.ndarray, level: float = 0.8) -> float:
        low, high = e.bounds[level]  # type: ignore[attr-defined]
        return coverage(e.actual[rows], low[rows], high[rows])  # type: ignore[attr-defined]

    assert covered(apart, new) > covered(pooled, new)
    assert covered(apart, ~new) == covered(pooled, ~new)
    summary = apart.as_dict()
    assert summary["novel_runs"] == int(new.sum())
    assert summary["coverage_80_novel"] == pytest.approx(covered(apart, new), abs=1e-4)
    assert summary["coverage_80_familiar"] == pytest.approx(covered(apart, ~new), abs=1e-4)
