"""The comparison window and the promotion rule, case by case."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from autofe.errors import ConfigError
from autofe.modeling.dataset import Labelled
from autofe.pipelines.nightly_compare import choose_window, decide

START = datetime(2026, 11, 1)
RUNS: Labelled = [(f"r{i}", "j", START + timedelta(hours=i), 10.0 + i) for i in range(200)]


def through(new: int) -> datetime:
    """The champion's last training run when ``new`` runs came after it."""
    return RUNS[len(RUNS) - new - 1][2]


@pytest.mark.parametrize(
    ("new", "recent", "size", "rule"),
    [
        (None, None, 40, "latest 20 %"),  # no champion
        (0, None, 40, "latest 20 %"),  # nothing new: the latest 20 %
        (25, None, 40, "latest 20 %"),
        (40, None, 40, "latest 20 %"),  # a tie keeps the simpler rule
        (70, None, 70, "since the last promotion"),
        (150, None, 100, "since the last promotion, capped at half of the labelled runs"),
        (70, 12, 12, "--recent"),
        (None, 100, 100, "--recent"),
    ],
)
def test_the_window(new: int | None, recent: int | None, size: int, rule: str) -> None:
    window = choose_window(RUNS, through(new) if new is not None else None, recent)
    assert (window.size, window.rule, window.since_promotion) == (size, rule, new or 0)
    assert window.first_submit == RUNS[len(RUNS) - size][2]
    assert window.share * len(RUNS) == pytest.approx(size)


@pytest.mark.parametrize("recent", [0, -3, 101])
def test_a_recent_outside_one_to_half_is_refused(recent: int) -> None:
    with pytest.raises(ConfigError, match=f"--recent {recent}: must be between 1 and 100"):
        choose_window(RUNS, None, recent)


@pytest.mark.parametrize(
    ("challenger", "champion", "margin", "promote", "reason"),
    [
        (0.30, None, 0.02, True, "no active model"),
        (0.312, 0.309, 0.02, False, "challenger MAPE 31.2 % vs champion 30.9 %: not better by 2 %"),
        (0.303, 0.309, 0.02, False, "challenger MAPE 30.3 % vs champion 30.9 %: not better by 2 %"),
        (
            0.30282,
            0.309,
            0.02,
            True,
            "challenger MAPE 30.3 % vs champion 30.9 %: 2.0 % better (margin 2 %)",
        ),
        (
            0.30,
            0.31,
            0.0,
            True,
            "challenger MAPE 30.0 % vs champion 31.0 %: 3.2 % better (margin 0 %)",
        ),
        (
            0.31,
            0.31,
            0.0,
            True,
            "challenger MAPE 31.0 % vs champion 31.0 %: 0.0 % better (margin 0 %)",
        ),
        (None, 0.31, 0.02, False, "the loop kept no features: there is no challenger"),
        (None, None, 0.02, False, "the loop kept no features and there is no active model"),
    ],
)
def test_the_promotion_rule(
    challenger: float | None, champion: float | None, margin: float, promote: bool, reason: str
) -> None:
    decision = decide(challenger, champion, margin)
    assert (decision.promote, decision.reason) == (promote, reason)


def test_a_champion_that_cannot_be_scored_gives_way() -> None:
    decision = decide(0.4, None, 0.02, "model.joblib: SHA-256 differs from model.manifest.json")
    assert decision.promote
    assert decision.reason == (
        "the active model cannot be scored (model.joblib: SHA-256 differs from model.manifest.json)"
    )


def test_too_few_labelled_runs_for_a_night() -> None:
    choose_window(RUNS[:60], None, None)
    with pytest.raises(ConfigError, match="59 labelled runs are too few for a night: at least 60"):
        choose_window(RUNS[:59], None, None)
