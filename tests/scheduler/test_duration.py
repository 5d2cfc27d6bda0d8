"""The duration distribution: the model's interval read back as a log-normal."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from autofe.scheduler.duration import (
    Z95,
    duration_quantile,
    durations_from_normals,
    p_within,
    sample_durations,
)
from autofe.scheduler.jobs import Estimate

# A wide, skewed interval: 20 min median, 12 to 45 min.
EST = Estimate(1200.0, 720.0, 2700.0)


def test_a_symmetric_interval_is_the_5th_to_95th_percentile() -> None:
    est = Estimate(1200.0, 600.0, 2400.0)
    assert p_within(est, 1200.0) == pytest.approx(0.5)
    assert p_within(est, 600.0) == pytest.approx(0.05)
    assert p_within(est, 2400.0) == pytest.approx(0.95)


def test_a_skewed_interval_keeps_its_width_around_the_median() -> None:
    # The median stays the model's; the 5th..95th span is the interval's (in log terms).
    assert p_within(EST, EST.p50_s) == pytest.approx(0.5)
    span = duration_quantile(EST, 0.95) / duration_quantile(EST, 0.05)
    assert span == pytest.approx(EST.high_s / EST.low_s)


def test_quantile_inverts_p_within() -> None:
    for q in (0.01, 0.2, 0.5, 0.8, 0.99):
        assert p_within(EST, duration_quantile(EST, q)) == pytest.approx(q)


def test_samples_follow_the_closed_form() -> None:
    s = sample_durations(EST, 20_000, seed=7)
    for seconds in (900.0, 1200.0, 2000.0, 2700.0):
        share = float(np.mean(s <= seconds))
        p = p_within(EST, seconds)
        # four standard errors of a share of 20 000 samples
        assert abs(share - p) < 4 * np.sqrt(p * (1 - p) / s.size)


def test_sampling_is_deterministic_for_a_seed() -> None:
    a = sample_durations(EST, 100, seed=3)
    assert np.array_equal(a, sample_durations(EST, 100, seed=3))
    assert not np.array_equal(a, sample_durations(EST, 100, seed=4))


def test_common_draws_keep_the_ratio_of_medians() -> None:
    # Two shapes with the same relative spread: sample by sample, one is 3x the other.
    z = np.random.default_rng(0).standard_normal(50)
    fast = durations_from_normals(Estimate(400.0, 240.0, 900.0), z)
    slow = durations_from_normals(EST, z)
    assert np.allclose(slow / fast, 3.0)


def test_no_time_means_no_chance() -> None:
    assert p_within(EST, 0.0) == 0.0
    assert p_within(EST, -5.0) == 0.0


def test_a_99_bound_sets_the_upper_tail_and_leaves_the_interval_alone() -> None:
    # the kmeans miss on CherryPick: p50 564 s, 90 % high 745 s, ran 861 s
    plain = Estimate(564.0, 564.0**2 / 745.0, 745.0)
    tailed = Estimate(564.0, 564.0**2 / 745.0, 745.0, high99_s=1100.0)
    assert duration_quantile(plain, 0.99) < 861.0 < duration_quantile(tailed, 0.99)
    assert duration_quantile(tailed, 0.99) == pytest.approx(1100.0)
    assert p_within(tailed, 1100.0) == pytest.approx(0.99)
    for q in (0.05, 0.5, 0.9, 0.95):  # below the 95th percentile nothing moves
        assert duration_quantile(tailed, q) == pytest.approx(duration_quantile(plain, q))
    z = np.linspace(-3.0, 4.0, 71)
    drawn = durations_from_normals(tailed, z)
    assert np.all(np.diff(drawn) > 0)  # continuous and increasing through z95
    assert drawn[np.searchsorted(z, Z95) - 1] <= 745.0 + 1e-9
    for zi, d in zip(z, drawn, strict=True):
        assert p_within(tailed, float(d)) == pytest.approx(float(NormalDist().cdf(zi)), abs=1e-9)
