"""Time-ordered cuts never separate runs submitted at the same instant: on the shipped example
replicated for ten teams (every run ten times, at the same times), no fold or holdout puts one
copy of a run in training and another in its evaluation block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autofe.errors import ConfigError
from autofe.modeling.dataset import labelled_runs
from autofe.modeling.splits import holdout_cut, tie_safe, time_folds
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.replicate import replicate_warehouse


@pytest.fixture(scope="module")
def ten_teams(example_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    out = tmp_path_factory.mktemp("teams") / "x10.duckdb"
    replicate_warehouse(example_warehouse, out, copies=10)
    with open_warehouse(out, read_only=True) as con:
        return [t for _, _, t, _ in labelled_runs(con)]


def test_no_fold_separates_runs_submitted_together(ten_teams: list[Any]) -> None:
    times = ten_teams
    assert len(times) == 4_810 and len(set(times)) == 481  # the example's 481 labelled runs
    folds = time_folds(len(times), 5, 0.5, times)
    assert len(folds) == 5
    for train, test in folds:
        assert {times[i] for i in train}.isdisjoint({times[i] for i in test})
        assert max(times[i] for i in train) < min(times[i] for i in test)
    # without the times, the index cuts split copies of one run
    plain = time_folds(len(times), 5, 0.5)
    assert any({times[i] for i in a} & {times[i] for i in b} for a, b in plain)


def test_holdout_cut_keeps_copies_together(ten_teams: list[Any]) -> None:
    cut = holdout_cut(ten_teams, 0.2)
    assert cut % 10 == 0 and 0 <= cut - round(4_810 * 0.8) < 10
    assert ten_teams[cut - 1] != ten_teams[cut]


def test_distinct_times_give_the_index_cuts() -> None:
    times = list(range(100))
    assert [(len(a), len(b)) for a, b in time_folds(100, 5, 0.5, times)] == [
        (len(a), len(b)) for a, b in time_folds(100, 5, 0.5)
    ]
    assert holdout_cut(times, 0.2) == 80 and tie_safe(30, times) == 30


def test_a_tail_submitted_at_one_instant_has_no_fold() -> None:
    with pytest.raises(ConfigError, match="submitted at one instant"):
        time_folds(10, 3, 0.4, times=[0, 1, 2, 3, 3, 3, 3, 3, 3, 3])
