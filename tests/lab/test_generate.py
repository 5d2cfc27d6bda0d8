"""autofe lab generate: a tiny real-PySpark workspace that autofe ingest links end to end."""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pytest

from autofe.config import IngestSettings
from autofe.errors import ConfigError
from autofe.ingest.ingest import ingest
from autofe.lab.configs import sweep_configs
from autofe.lab.forget import forget_runs
from autofe.lab.generate import (
    Adhoc,
    GenerateReport,
    _open_manifest,
    build_plan,
    generate,
    load_jobs,
)
from autofe.lab.plan import OFF_HABIT_SHARE, RunSpec, habit
from autofe.lab.runner import Outcome
from autofe.lab.workspace_writer import write_run, write_static


@dataclass(frozen=True)
class TinyJob:
    name: str
    kind: str
    script: str
    tables: tuple[str, ...]
    schedule: str
    variants: tuple[str, ...] = ()

    def params(self, rng: random.Random, day: int) -> dict[str, str]:
        return {"start": f"199{rng.randrange(3, 6)}-01-01", "end": "1998-12-31"}


JOBS = (
    TinyJob(
        "revenue_by_nation",
        "sql",
        "SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue\n"
        "FROM lineitem JOIN orders ON l_orderkey = o_orderkey\n"
        "JOIN customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey\n"
        "WHERE l_shipmonth BETWEEN DATE '${start}' AND DATE '${end}'\nGROUP BY n_name",
        ("lineitem", "orders", "customer", "nation"),
        "daily",
    ),
    TinyJob(
        "skewed_parts_etl",
        "pyspark",
        "def run(spark, params):\n"
        "    df = spark.sql('SELECT l_partkey, count(*) AS n FROM lineitem_skew "
        "JOIN part ON l_partkey = p_partkey GROUP BY l_partkey')\n"
        "    df.write.mode('overwrite').parquet(params['scratch'] + '/parts')\n",
        ("lineitem_skew", "part"),
        "hourly",
    ),
)

needs_lab = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
    reason="pyspark and java are needed",
)


@pytest.mark.slow
@needs_lab
def test_tiny_workspace_ingests_with_linked_event_logs(tmp_path: Path) -> None:
    out = tmp_path / "ws"
    report = generate(out, runs=3, seed=7, days=1, jobs=JOBS, scale_factors=(0.01,))
    retries = report.planned - 3  # a spot node loss adds a failed attempt and its retry
    assert report.executed + report.skipped_retries == report.planned
    assert report.failed <= retries
    again = generate(out, runs=3, seed=7, days=1, jobs=JOBS, scale_factors=(0.01,))
    assert again.executed == 0 and again.already_done == report.executed
    first = min(int(p.stem) for p in (out / "runs").glob("*.json"))
    before = json.loads((out / "runs" / f"{first}.json").read_text())
    forgotten = forget_runs(out, [first])  # run again, at the same virtual time
    resumed = generate(out, runs=3, seed=7, days=1, jobs=JOBS, scale_factors=(0.01,))
    assert resumed.already_done == report.executed - len(forgotten) and resumed.executed >= 1
    after = json.loads((out / "runs" / f"{first}.json").read_text())
    assert (after["start_time"], after["cluster_instance"]) == (
        before["start_time"],
        before["cluster_instance"],
    )

    parts = sorted(p for p in (out / "cluster-logs").rglob("eventlog*") if p.is_file())
    assert len(parts) == len(list((out / "runs").glob("*.json")))  # one zstd part per run
    assert all(p.name.startswith("eventlog-2024-") and p.suffix == ".zstd" for p in parts)

    db = tmp_path / "w.duckdb"
    ingest([out], IngestSettings(db=db, workers=1))
    runs = {int(p.stem): json.loads(p.read_text()) for p in (out / "runs").glob("*.json")}
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT run_id, duration_s FROM runs").fetchall()
    assert {int(r): d for r, d in rows} == {
        k: v["execution_duration"] / 1000 for k, v in runs.items()
    }
    apps = con.execute(
        "SELECT a.run_id, count(DISTINCT a.app_id), count(s.stage_id) FROM applications a "
        "JOIN stages s USING (app_key) GROUP BY a.run_id"
    ).fetchall()
    assert {int(r) for r, _, _ in apps} == set(runs)
    assert all(n_apps == 1 and n_stages > 0 for _, n_apps, n_stages in apps)


@pytest.mark.slow
@needs_lab
def test_fresh_jvm_launches_one_jvm_per_run(tmp_path: Path) -> None:
    out = tmp_path / "ws"
    report = generate(out, runs=2, seed=3, days=1, jobs=JOBS, scale_factors=(0.01,), fresh_jvm=True)
    assert report.executed >= 2 and report.jvm_launches == report.executed
    assert json.loads((out / "lab.json").read_text())["settings"]["fresh_jvm"] is True
    runs = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
    assert all(r["setup_duration"] >= 1000 for r in runs)  # every run paid a JVM launch


def _spark_jobs(workspace: Path) -> int:
    """Spark jobs started in the workspace's event logs."""
    import zstandard

    logs = [p for p in (workspace / "cluster-logs").rglob("eventlog*") if p.is_file()]
    text = b"".join(
        zstandard.ZstdDecompressor().decompressobj().decompress(p.read_bytes()) for p in logs
    )
    return text.count(b'"Event":"SparkListenerJobStart"')


@pytest.mark.slow
@needs_lab
def test_a_primed_session_runs_its_warm_up_before_the_clock_starts(tmp_path: Path) -> None:
    """The priming query (a Parquet count, an aggregate) adds Spark jobs to the same run."""

    def run(name: str, prime: bool) -> GenerateReport:
        out = tmp_path / name
        return generate(
            out, 1, 3, 1, jobs=JOBS[:1], scale_factors=(0.01,), fresh_jvm=True, prime=prime
        )

    plain, primed = run("plain", False), run("primed", True)
    assert plain.executed == primed.executed == 1 and primed.failed == plain.failed == 0
    settings = json.loads((tmp_path / "primed" / "lab.json").read_text())["settings"]
    assert settings["prime_session"] is True
    assert _spark_jobs(tmp_path / "primed") >= _spark_jobs(tmp_path / "plain") + 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"runs": 0}, "--runs must be positive"),
        ({"runs": 2, "job_names": ["no_such_job"]}, "unknown lab job 'no_such_job'"),
        ({"runs": 2, "sweep_points": -1}, "--sweep-points must not be negative"),
        ({"runs": 2, "repeat_jobs": ["skewed_parts_etl"], "repeats": 0}, "--repeats must be"),
        ({"runs": 2, "repeat_jobs": ["nope"], "repeats": 3}, "unknown lab job 'nope'"),
        ({"runs": 2, "repeats": 3}, "--repeats needs --repeat-jobs"),
    ],
)
def test_bad_arguments_raise_config_error(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        generate(tmp_path / "ws", seed=1, jobs=JOBS, **kwargs)  # type: ignore[arg-type]


def test_unwritable_out_raises_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write to"):
        generate(blocker / "ws", runs=1, seed=1, jobs=JOBS)


def test_sweep_points_run_one_job_and_params_under_every_config() -> None:
    plan = build_plan(JOBS, 4, seed=3, days=5, scale_factors=(0.01, 0.1), sweep_points=3)
    grid = sweep_configs()
    main, sweep = plan[: -3 * len(grid)], plan[-3 * len(grid) :]
    assert len(sweep) == 3 * len(grid)
    assert all(s.tags == {"sweep": True} for s in sweep) and not any(s.tags for s in main)
    assert [s.run_id for s in plan] == list(range(1001, 1001 + len(plan)))
    for k in range(3):
        point = sweep[k * len(grid) : (k + 1) * len(grid)]
        assert [s.config for s in point] == grid
        assert len({(s.job.name, s.day, s.scale_factor, str(s.params)) for s in point}) == 1
    assert build_plan(JOBS, 4, seed=3, days=5, scale_factors=(0.01, 0.1), sweep_points=3) == plan
    other = build_plan(JOBS, 4, seed=4, days=5, scale_factors=(0.01, 0.1), sweep_points=3)
    assert other != plan


def test_sweep_points_visit_every_job_before_repeating_one() -> None:
    points = len(JOBS) + 1
    plan = build_plan(JOBS, 0, seed=2, days=5, scale_factors=(0.01,), sweep_points=points)
    jobs = [plan[i * len(sweep_configs())].job.name for i in range(points)]
    assert set(jobs[: len(JOBS)]) == {j.name for j in JOBS}


def test_sweep_jobs_limit_the_rotation_and_unknown_names_are_refused() -> None:
    name = JOBS[1].name
    plan = build_plan(
        JOBS, 0, seed=2, days=5, scale_factors=(0.01,), sweep_points=3, sweep_jobs=(name,)
    )
    assert len(plan) == 3 * len(sweep_configs()) and {s.job.name for s in plan} == {name}
    with pytest.raises(ConfigError, match="--sweep-jobs names jobs not in this workspace: nope"):
        build_plan(
            JOBS, 0, seed=2, days=5, scale_factors=(0.01,), sweep_points=3, sweep_jobs=("nope",)
        )


def test_named_sweep_jobs_go_round_in_the_order_given() -> None:
    names = tuple(j.name for j in reversed(JOBS))
    points = len(names) + 1
    plan = build_plan(
        JOBS, 0, seed=2, days=5, scale_factors=(0.01,), sweep_points=points, sweep_jobs=names
    )
    visited = [plan[i * len(sweep_configs())].job.name for i in range(points)]
    assert visited == [*names, names[0]]


def test_sweep_runs_carry_their_job_s_id_whatever_the_sweep_order() -> None:
    names = tuple(j.name for j in reversed(JOBS))
    plan = build_plan(
        JOBS, 6, seed=2, days=5, scale_factors=(0.01,), sweep_points=2, sweep_jobs=names
    )
    ids: dict[str, int] = {}
    assert all(ids.setdefault(s.job.name, s.job_id) == s.job_id for s in plan)
    assert ids == {"revenue_by_nation": 101, "skewed_parts_etl": 102}


def _habitual(spec: RunSpec, seed: int, days: int) -> bool:
    usual = habit(spec.job, seed, days)
    same_config = replace(spec.config, spot_loss=False) == replace(
        usual.config(spec.day), spot_loss=False
    )
    return same_config and spec.params == usual.params(spec.job, spec.day)


def test_recurring_jobs_keep_their_habit_and_ad_hoc_ones_do_not() -> None:
    jobs = load_jobs()
    plan = build_plan(
        jobs, 400, seed=3, days=30, scale_factors=(1.0,), sweep_points=31, recurring=True
    )
    main = [s for s in plan if not s.tags and s.attempt == 0]
    scheduled = [s for s in main if s.job.schedule != "adhoc"]
    adhoc = [s for s in main if s.job.schedule == "adhoc"]
    share = sum(_habitual(s, 3, 30) for s in scheduled) / len(scheduled)
    assert 1 - OFF_HABIT_SHARE - 0.07 <= share <= 1 - OFF_HABIT_SHARE + 0.07
    assert adhoc and sum(_habitual(s, 3, 30) for s in adhoc) <= 1
    changed = {s.job.name for s in scheduled if s.config.master != scheduled[0].config.master}
    assert changed  # configurations still differ between jobs
    sweeps = [s for s in plan if s.tags.get("sweep") and s.job.schedule != "adhoc"]
    assert sweeps and all(s.params == habit(s.job, 3, 30).params(s.job, s.day) for s in sweeps)
    plain = build_plan(jobs, 400, seed=3, days=30, scale_factors=(1.0,))
    plain_scheduled = [s for s in plain if s.attempt == 0 and s.job.schedule != "adhoc"]
    assert sum(_habitual(s, 3, 30) for s in plain_scheduled) / len(plain_scheduled) < 0.1


def test_repeat_jobs_are_identical_runs_tagged_by_index() -> None:
    names = ["revenue_by_nation", "skewed_parts_etl"]
    plan = build_plan(JOBS, 0, seed=1, days=3, scale_factors=(0.01,), repeat_jobs=names, repeats=4)
    assert len(plan) == 8 and [s.run_id for s in plan] == list(range(1001, 1009))
    for name in names:
        runs = [s for s in plan if s.job.name == name]
        assert [s.tags for s in runs] == [{"repeat": i} for i in range(4)]
        assert len({(str(s.params), s.config, s.day, s.scale_factor) for s in runs}) == 1
        assert not runs[0].config.spot and runs[0].day == 1  # the middle of three days
    again = build_plan(JOBS, 0, seed=1, days=3, scale_factors=(0.01,), repeat_jobs=names, repeats=4)
    assert again == plan


def test_sweep_and_repeat_settings_are_part_of_the_resume_check(tmp_path: Path) -> None:
    out = tmp_path / "ws"
    out.mkdir()
    settings = {
        "seed": 1,
        "runs": 2,
        "days": 7,
        "scale_factors": [0.01],
        "jobs": [j.name for j in JOBS],
    }
    (out / "lab.json").write_text(json.dumps({"settings": settings, "runs": {}}))
    with pytest.raises(ConfigError, match="other settings"):
        generate(out, runs=2, seed=1, jobs=JOBS, scale_factors=(0.01,), sweep_points=1)


def test_lab_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from autofe.cli import app
    from autofe.console import EXIT_USER_ERROR

    result = CliRunner().invoke(app, ["lab", "generate", "--out", str(tmp_path), "--runs", "0"])
    assert result.exit_code == EXIT_USER_ERROR
    assert result.stderr.strip() == "error: --runs must be positive, got 0"


def test_a_job_with_variants_changes_script_once_mid_calendar(tmp_path: Path) -> None:
    changing = replace(JOBS[0], name="changing", variants=(JOBS[0].script + "\n-- v2",))
    plan = build_plan((changing, JOBS[1]), 60, seed=4, days=30, scale_factors=(0.01,))
    by_day = sorted((s.day, s.version) for s in plan if s.job.name == "changing")
    versions = [v for _, v in by_day]
    assert versions == sorted(versions) and set(versions) == {0, 1}
    switch = next(d for d, v in by_day if v == 1)
    assert 10 <= switch <= 21
    assert all(s.version == 0 for s in plan if s.job.name == JOBS[1].name)
    late = next(s for s in plan if s.version == 1)
    assert late.script.endswith("-- v2")

    write_static(tmp_path, {101: changing})
    assert (tmp_path / "scripts" / "lab" / "changing.v2.sql").read_text().endswith("-- v2")
    write_run(tmp_path, late, Outcome("SUCCESS", 0, 10, 1000, ""))
    run = json.loads((tmp_path / "runs" / f"{late.run_id}.json").read_text())
    assert run["tasks"][0]["notebook_task"]["notebook_path"] == "/Workspace/lab/changing.v2"


def test_a_retry_is_submitted_after_its_failed_attempt_ended(tmp_path: Path) -> None:
    from autofe.lab.generate import RETRY_DELAY_MS, _after_failure

    plan = build_plan(JOBS, 40, seed=2, days=3, scale_factors=(0.01,))
    retry = next(s for s in plan if s.retry_of is not None)
    assert _after_failure(tmp_path, retry) == retry  # the attempt has not run yet
    failed = next(s for s in plan if s.run_id == retry.retry_of)
    write_run(tmp_path, failed, Outcome("FAILED", 0, 5_000, 90_000, "node lost"))
    moved = _after_failure(tmp_path, retry)
    assert moved.submit_ms == failed.submit_ms + 95_000 + RETRY_DELAY_MS
    assert (moved.run_id, moved.params) == (retry.run_id, retry.params)


def test_adhoc_runs_are_appended_without_changing_the_other_runs() -> None:
    jobs = load_jobs()
    names = [jobs[3].name, jobs[7].name]
    base = build_plan(jobs, 30, seed=3, days=30, scale_factors=(10.0,), sweep_points=2)
    adhoc = Adhoc(40, tuple(names), (1.0, 10.0))
    plan = build_plan(jobs, 30, seed=3, days=30, scale_factors=(10.0,), sweep_points=2, adhoc=adhoc)
    assert plan[: len(base)] == base
    added = plan[len(base) :]
    assert [s.run_id for s in added] == list(range(base[-1].run_id + 1, plan[-1].run_id + 1))
    assert len([s for s in added if s.attempt == 0]) == 40
    assert all(s.tags.get("adhoc") and s.job.name in names for s in added)
    ids = {s.job.name: s.job_id for s in base}
    assert all(s.job_id == ids[s.job.name] for s in added if s.job.name in ids)
    assert {s.scale_factor for s in added} == {1.0, 10.0}
    retries = [s for s in added if s.retry_of is not None]
    by_id = {s.run_id: s for s in added}
    assert all(s.retry_of is not None and by_id[s.retry_of].config.spot_loss for s in retries)
    windows = {s.params.get("start") for s in added if s.job.name == names[0]}
    assert len(windows) > 5  # drawn per run, not a recurring habit


def test_a_finished_workspace_can_be_extended_with_adhoc_runs_once(tmp_path: Path) -> None:
    settings = {"seed": 1, "runs": 2, "days": 7, "scale_factors": [0.01], "jobs": ["a"]}
    (tmp_path / "lab.json").write_text(json.dumps({"settings": settings, "runs": {"1001": {}}}))
    extended = settings | Adhoc(5, ("a",), (0.1,)).settings()
    manifest = _open_manifest(tmp_path, extended)
    assert manifest["runs"] == {"1001": {}}
    assert json.loads((tmp_path / "lab.json").read_text())["settings"] == extended
    with pytest.raises(ConfigError, match="other settings"):
        _open_manifest(tmp_path, settings | Adhoc(6, ("a",), (0.1,)).settings())
    with pytest.raises(ConfigError, match="other settings"):
        _open_manifest(tmp_path, settings | {"seed": 2} | Adhoc(5).settings())


@pytest.mark.parametrize(
    ("adhoc", "message"),
    [
        (Adhoc(0, ("revenue_by_nation",)), "--adhoc-runs must be positive"),
        (Adhoc(3, ("nope",)), "--adhoc-jobs names jobs not in this workspace: nope"),
        (Adhoc(3, (), (0.0,)), "--adhoc-scale-factor must be positive"),
    ],
)
def test_bad_adhoc_settings_are_refused(adhoc: Adhoc, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_plan(JOBS, 2, seed=1, days=3, scale_factors=(0.01,), adhoc=adhoc)


def test_an_adhoc_run_is_written_as_a_one_time_run_tagged_adhoc(tmp_path: Path) -> None:
    jobs = load_jobs()
    plan = build_plan(jobs, 0, seed=1, days=3, scale_factors=(0.01,), adhoc=Adhoc(1))
    spec = next(s for s in plan if s.attempt == 0)
    write_static(tmp_path, {spec.job_id: spec.job})
    write_run(tmp_path, spec, Outcome("SUCCESS", 0, 2_000, 9_000, ""))
    run = json.loads((tmp_path / "runs" / f"{spec.run_id}.json").read_text())
    assert run["trigger"] == "ONE_TIME" and run["tags"]["adhoc"] is True
