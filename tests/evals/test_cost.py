"""Configuration choice at a deadline, judged against every configuration's true runtime."""

from __future__ import annotations

import pytest

from autofe.errors import ConfigError
from autofe.evals.cost import Option, comparable_points, compare_policies, static_config

# (config, hourly price, true seconds) per point: a small node, a mid node, a big node.
TRUTH = {
    "p1": [("small", 1.0, 100.0), ("mid", 2.0, 60.0), ("big", 4.0, 40.0)],
    "p2": [("small", 1.0, 50.0), ("mid", 2.0, 45.0), ("big", 4.0, 44.0)],
}


def _options(error: float = 1.0, width: float = 1.0) -> list[Option]:
    return [
        Option(point, config, price, seconds, seconds * error, seconds * error * width)
        for point, rows in TRUTH.items()
        for config, price, seconds in rows
    ]


def _by_policy(options: list[Option], factor: float = 1.5) -> dict[str, dict[str, object]]:
    return {r.policy: r.as_dict() for r in compare_policies(options, factor)}


def test_perfect_predictions_choose_like_the_oracle() -> None:
    results = _by_policy(_options())
    # deadlines 60 s and 66 s: p1 → mid (cost 2·60) , p2 → small (cost 1·50)
    oracle = results["oracle"]
    assert oracle["cost_usd"] == pytest.approx((2 * 60 + 50) / 3600, abs=1e-6)
    assert results["predicted p50"]["cost_usd"] == oracle["cost_usd"]
    assert results["predicted p50"]["regret_vs_oracle"] == 0.0
    assert results["static"]["cost_usd"] == pytest.approx((2 * 60 + 2 * 45) / 3600, abs=1e-6)
    assert results["largest"]["cost_usd"] == pytest.approx((4 * 40 + 4 * 44) / 3600, abs=1e-6)
    assert all(r["deadlines_met"] == 1.0 for r in results.values())
    saving = 1 - (2 * 60 + 50) / (2 * 60 + 2 * 45)
    assert results["oracle"]["saving_vs_static"] == pytest.approx(saving, abs=1e-4)


def test_optimistic_predictions_miss_deadlines_and_the_interval_bound_catches_them() -> None:
    results = _by_policy(_options(error=0.6, width=2.0))  # p50 40 % low; p90 bound 20 % high
    assert results["predicted p50"]["deadlines_met"] == 0.5  # p1: small predicted at 60 s, is 100
    assert results["predicted p90"]["deadlines_met"] == 1.0


def test_static_is_the_middle_configuration_by_price() -> None:
    assert static_config(_options()) == "mid"


def test_points_without_the_static_configuration_are_left_out() -> None:
    options = [o for o in _options() if not (o.point == "p2" and o.config == "mid")]
    assert list(comparable_points(options, "mid")) == ["p1"]
    assert compare_policies(options)[0].points == 1
    partial = [o for o in _options() if not (o.point == "p2" and o.config == "big")]
    assert [len(v) for v in comparable_points(partial, "mid").values()] == [3, 2]


def test_bad_inputs_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="deadline factor must be at least 1"):
        compare_policies(_options(), 0.5)
    with pytest.raises(ConfigError, match="no sweep options"):
        compare_policies([])
