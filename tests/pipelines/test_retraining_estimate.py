"""A retraining's duration estimate from autofe's own past nights: nightly.json records written
by hand for the statistics and the prior (the estimate from real nights is in test_nightly.py,
on its home after the first night)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autofe.errors import ConfigError
from autofe.pipelines.home import Home
from autofe.pipelines.retraining_estimate import (
    MIN_LOG_SD,
    RECENT_NIGHTS,
    Z90,
    estimate_retraining,
    history_estimate,
)

START = "2026-12-01T02:00:00+00:00"


def write_nights(home: Path, records: list[dict[str, Any]]) -> None:
    """Each record as a night folder's nightly.json, in stamp order."""
    for n, record in enumerate(records):
        folder = Home(home).nightly_runs / f"20261201T{n:06d}Z"
        folder.mkdir(parents=True)
        (folder / "nightly.json").write_text(json.dumps({"stamp": folder.name, **record}))


def done(total: float, **fields: Any) -> dict[str, Any]:
    return {"status": "done", "seconds": {"loop": total - 1.0, "total": total}, **fields}


def test_fewer_than_three_nights_give_the_budget_prior(tmp_path: Path) -> None:
    write_nights(tmp_path, [done(80.0), done(90.0, mode="incremental"), done(70.0, mode="full")])
    incremental = estimate_retraining(tmp_path, "incremental", 300.0)
    full = estimate_retraining(tmp_path, "full", 300.0)
    assert (incremental.source, incremental.nights) == ("prior", 2)
    assert (full.source, full.nights) == ("prior", 1)
    assert incremental.p50_s < full.p50_s
    for e in (incremental, full):
        assert e.high_s > 300.0 and e.low_s <= e.p50_s <= e.high_s
    # the prior scales with the loop's budget; a home that does not exist has no nights
    longer = estimate_retraining(tmp_path / "none", "incremental", 600.0)
    assert longer.nights == 0 and longer.p50_s > incremental.p50_s


def test_only_finished_nights_of_the_kind_count(tmp_path: Path) -> None:
    write_nights(
        tmp_path,
        [
            done(100.0),  # before nights had a mode: incremental
            {"status": "failed", "seconds": {"ingest": 1.0, "total": 1.0}, "mode": "incremental"},
            {"status": "interrupted", "seconds": {"total": 5.0}},
            done(3000.0, mode="full"),
            done(200.0, mode="incremental"),
            {"status": "done", "started": START, "finished": "2026-12-01T02:05:00+00:00"},
            done(0.0),  # no length: not a night to learn from
        ],
    )
    (Home(tmp_path).nightly_runs / "20261202T000000Z").mkdir()  # a night killed outright
    estimate = estimate_retraining(tmp_path, "incremental", 300.0)
    assert estimate.source == "history" and estimate.nights == 3
    assert estimate.p50_s == 200.0  # the median of 100, 200 and 300 (started to finished)


def test_near_equal_nights_still_get_an_interval(tmp_path: Path) -> None:
    write_nights(tmp_path, [done(t, mode="full") for t in (100.0, 100.2, 99.9, 100.1)])
    estimate = estimate_retraining(tmp_path, "full", 300.0)
    assert estimate.source == "history" and estimate.p50_s == pytest.approx(100.05)
    assert estimate.high_s / estimate.p50_s == pytest.approx(math.exp(Z90 * MIN_LOG_SD), rel=1e-3)
    assert estimate.p50_s / estimate.low_s == pytest.approx(math.exp(Z90 * MIN_LOG_SD), rel=1e-3)


def test_the_interval_is_a_log_normal_fit_of_the_recent_nights(tmp_path: Path) -> None:
    old = [done(5000.0)] * 5  # older than the latest RECENT_NIGHTS: ignored
    recent = [done(60.0 * 1.5 ** (n % 4)) for n in range(RECENT_NIGHTS)]
    write_nights(tmp_path, old + recent)
    estimate = estimate_retraining(tmp_path, "incremental", 300.0)
    logs = [math.log(r["seconds"]["total"]) for r in recent]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    assert sd > MIN_LOG_SD and estimate.nights == RECENT_NIGHTS
    assert estimate.p50_s == statistics.median(r["seconds"]["total"] for r in recent)
    assert estimate.low_s == pytest.approx(math.exp(mean - Z90 * sd))
    assert estimate.high_s == pytest.approx(math.exp(mean + Z90 * sd))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.5, 1e5), min_size=3, max_size=40))
def test_the_median_is_always_inside_the_interval(seconds: list[float]) -> None:
    estimate = history_estimate(seconds)
    assert 0 < estimate.low_s <= estimate.p50_s <= estimate.high_s
    assert estimate.high_s / estimate.low_s >= math.exp(2 * Z90 * MIN_LOG_SD) * (1 - 1e-9)


def test_a_bad_kind_or_budget_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="retraining kind 'warm': must be one of"):
        estimate_retraining(tmp_path, "warm", 300.0)  # type: ignore[arg-type]
    for budget in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ConfigError, match="--budget-seconds"):
            estimate_retraining(tmp_path, "full", budget)
