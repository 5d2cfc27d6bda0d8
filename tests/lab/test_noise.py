"""noise_floor over hand-written run files (no Spark)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from autofe.errors import ConfigError
from autofe.lab.noise import NoiseRow, noise_floor


def _run(
    run_id: int, job: str, ms: int, repeat: int | None, state: str = "SUCCESS"
) -> dict[str, object]:
    return {
        "run_id": run_id,
        "run_name": job,
        "state": {"life_cycle_state": "TERMINATED", "result_state": state},
        "execution_duration": ms,
        "tags": {"sweep": False, "repeat": repeat},
    }


def test_noise_floor_uses_only_successful_repeat_runs(tmp_path: Path) -> None:
    runs = [
        _run(1001, "etl", 9000, None),  # a planned run, not a repeat
        _run(1002, "etl", 2000, 0),
        _run(1003, "etl", 4000, 1),
        _run(1004, "etl", 3000, 2),
        _run(1005, "etl", 500, 3, state="FAILED"),  # a lost node cuts the run short
        _run(1006, "agg", 1500, 0),
    ]
    (tmp_path / "runs").mkdir()
    for run in runs:
        (tmp_path / "runs" / f"{run['run_id']}.json").write_text(json.dumps(run))

    agg, etl = noise_floor(tmp_path)

    assert agg == NoiseRow("agg", 1, 1.5, None, None)
    assert (etl.job, etl.n, etl.mean) == ("etl", 3, 3.0)
    assert etl.std is not None and math.isclose(etl.std, 1.0)
    assert etl.cv is not None and math.isclose(etl.cv, 1 / 3)

    (etl_warm,) = [r for r in noise_floor(tmp_path, warmup=1) if r.job == "etl"]
    assert (etl_warm.n, etl_warm.mean) == (2, 3.5)  # repeat 0 warmed the JVM up


def test_a_resumed_generation_s_fresh_jvm_is_warm_up_too(tmp_path: Path) -> None:
    """Repeat 3 launched a JVM (setup 5 s): with warm-up 2 it and repeat 4 are left out."""
    seconds = [9.0, 6.0, 4.0, 12.0, 7.0, 4.2, 4.1]
    (tmp_path / "runs").mkdir()
    for i, s in enumerate(seconds):
        run = _run(1001 + i, "etl", int(s * 1000), i) | {"setup_duration": 5000 if i == 3 else 90}
        (tmp_path / "runs" / f"{1001 + i}.json").write_text(json.dumps(run))
    (row,) = noise_floor(tmp_path, warmup=2)
    assert row.n == 3 and math.isclose(row.mean, (4.0 + 4.2 + 4.1) / 3)
    (cold,) = noise_floor(tmp_path)
    assert cold.n == len(seconds)


def test_noise_floor_needs_a_runs_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no runs/ folder"):
        noise_floor(tmp_path)


def test_noise_cli_refuses_a_negative_warmup(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from autofe.cli import app

    result = CliRunner().invoke(
        app, ["lab", "noise", "--workspace", str(tmp_path), "--warmup", "-1"]
    )
    assert result.exit_code == 2 and "--warmup must not be negative" in result.stderr


def test_with_a_fresh_jvm_per_run_warm_up_drops_only_the_first_repeats(tmp_path: Path) -> None:
    """``--fresh-jvm``: every repeat launched a JVM (setup 5 s), so all are equally cold."""
    seconds = [9.0, 6.0, 4.0, 4.4, 4.2]
    (tmp_path / "runs").mkdir()
    (tmp_path / "lab.json").write_text(json.dumps({"settings": {"fresh_jvm": True}}))
    for i, s in enumerate(seconds):
        run = _run(1001 + i, "etl", int(s * 1000), i) | {"setup_duration": 5000}
        (tmp_path / "runs" / f"{1001 + i}.json").write_text(json.dumps(run))
    (row,) = noise_floor(tmp_path, warmup=2)
    assert row.n == 3 and math.isclose(row.mean, (4.0 + 4.4 + 4.2) / 3)


def test_an_unreadable_lab_manifest_is_named(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "lab.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"lab\.json"):
        noise_floor(tmp_path)
