"""The shipped example workspace meets the workload lab's promises, measured on its own rows."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.config import EXAMPLE_DIR, example_workspace
from autofe.lab.effects import Effects, measure_workspace
from autofe.lab.noise import noise_floor
from autofe.workspace_archive import ARCHIVE_NAME


@pytest.fixture(scope="module")
def lab_small() -> Path:
    return example_workspace()


@pytest.fixture(scope="module")
def effects(lab_small: Path) -> Effects:
    return measure_workspace(lab_small)


def test_it_is_the_default_example_workspace_unpacked_from_its_archive(lab_small: Path) -> None:
    assert (EXAMPLE_DIR / ARCHIVE_NAME).is_file() and not (EXAMPLE_DIR / "runs").exists()
    assert (lab_small / "runs").is_dir() and lab_small != EXAMPLE_DIR


def test_shape_meets_the_issue(effects: Effects) -> None:
    s = effects.shape
    assert s.runs >= 400 and s.jobs >= 25 and s.virtual_days >= 30
    assert s.min_configs_per_job >= 3
    assert s.sweep_points >= 40 and s.sweep_configs == 6


def test_runtimes_spread_at_least_twenty_fold(effects: Effects) -> None:
    assert effects.shape.spread >= 20


def test_median_run_takes_ten_seconds(effects: Effects) -> None:
    assert effects.shape.median_s >= 10


def test_noise_floor_is_below_five_percent_on_twenty_repeats_of_three_jobs(
    lab_small: Path,
) -> None:
    """Every run launched its own JVM (``--fresh-jvm``): all repeats are equally cold, none is
    left out as warm-up."""
    rows = noise_floor(lab_small)
    assert len(rows) == 3 and all(r.n >= 20 for r in rows)
    assert all(r.cv is not None and r.cv <= 0.05 for r in rows)


def test_long_date_windows_run_longer(effects: Effects) -> None:
    """Within a job, scale factor and core count, runs over long windows against runs over
    short ones: most groups whose windows differ run longer on the long ones, and clearly so
    where the windows differ ≥ 4x (the measured ratios are in docs/lab.md)."""
    differing = [g for g in effects.pruning if g.window_ratio >= 2]
    assert len(differing) >= 8
    assert sum(g.runtime_ratio > 1 for g in differing) >= 0.75 * len(differing)
    assert statistics.median(g.runtime_ratio for g in differing if g.window_ratio >= 4) > 1.5


def test_skewed_tables_show_longer_straggler_tasks(effects: Effects) -> None:
    assert effects.skew_stage_ratio > effects.plain_stage_ratio


def test_size_in_the_repo_is_within_budget() -> None:
    size = sum(p.stat().st_size for p in EXAMPLE_DIR.rglob("*") if p.is_file())
    assert size <= 20 * 1024 * 1024


def test_effects_cli_reads_the_packed_folder_and_plots(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["lab", "effects", "--workspace", str(EXAMPLE_DIR), "--png", str(tmp_path / "h.png")]
    )
    assert result.exit_code == 0, result.output
    assert "spread" in result.stdout and (tmp_path / "h.png").stat().st_size > 1000


def test_effects_cli_refuses_a_folder_without_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["lab", "effects", "--workspace", str(tmp_path)])
    assert result.exit_code == 2 and "has no runs/ folder" in result.stderr
