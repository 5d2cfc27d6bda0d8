"""The run report's rounds: both curves, the time-ordered CV and the what-if score."""

from __future__ import annotations

import math

from autofe.pipelines.run_report_loop import iterations


def record(i: int, whatif: float | None) -> dict[str, object]:
    out: dict[str, object] = {
        "iteration": i, "proposed": 10, "gated": 8, "kept": 3, "features": 3 * (i + 1),
        "cv_r2": 0.5 + i / 10, "cv_mape": 0.3 - i / 100,
        "seconds": {"evaluate": 1.0, "whatif": 2.5},
        "whatif_mape": whatif,
    }  # fmt: skip
    return out


def test_both_curves_and_the_what_if_column() -> None:
    figure, rounds = iterations([record(0, 0.42), record(1, 0.405)])
    assert "what-if MAPE (configuration held out)" in figure and "CV MAPE" in figure
    assert "<th>what-if MAPE</th>" in rounds and "<th>of which what-if</th>" in rounds
    assert "42.0%" in rounds and "40.5%" in rounds
    assert rounds.count("<td>3.5</td>") == 2 and rounds.count("<td>2.5</td>") == 2


def test_records_without_a_what_if_score_show_n_a_and_no_curve() -> None:
    """None in metrics.json (one configuration), NaN or no key (records written before)."""
    old = record(2, None)
    del old["whatif_mape"]
    old["seconds"] = {"evaluate": 1.0}
    figure, rounds = iterations([record(0, None), record(1, math.nan), old])
    assert "what-if MAPE (configuration held out)" not in figure
    assert rounds.count("<td>n/a</td>") == 4
