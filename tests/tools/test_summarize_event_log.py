"""summarize_event_log on real logs: the numbers of SOURCE.md's inventory, and confinement."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from autofe.errors import ConfigError, PathNotAllowed
from autofe.tools.summarize_event_log import summarize_event_log

QUAL = "spark-rapids-tools/spark-events-qualification"
PROF = "spark-rapids-tools/spark-events-profiling"

# From SOURCE.md's inventory: app duration s, stages, tasks, SQL executions, Spark, app name
INVENTORY = {
    f"{QUAL}/nds_q72_dataproc_2_2.zstd": (116.7, 49, 13504, 25, "3.5.3", "NDS - Power Run"),
    f"{PROF}/malformed_json_eventlog.zstd": (120.0, 5, 217, 1, "3.1.1", "Spark shell"),
    "sparklint/spark_event_log_example": (312.5, 3, 204, 0, "1.5.2", "MyAppName"),
}


@pytest.mark.parametrize("name", sorted(INVENTORY))
def test_numbers_match_the_inventory(eventlogs: Path, name: str) -> None:
    duration, stages, tasks, sql, version, app_name = INVENTORY[name]
    summary = summarize_event_log(name, [eventlogs])
    assert summary.duration_s == pytest.approx(duration, abs=0.05)
    assert (summary.counts.stages, summary.counts.tasks, summary.counts.sql_executions) == (
        stages,
        tasks,
        sql,
    )
    assert (summary.spark_version, summary.app_name, summary.complete) == (version, app_name, True)
    assert summary.counts.bad_lines == (1 if "malformed" in name else 0)
    assert summary.start_time is not None and summary.end_time is not None
    assert summary.counts.events > summary.counts.tasks


def test_top_items_are_longest_first_and_bounded(eventlogs: Path) -> None:
    summary = summarize_event_log(f"{QUAL}/nds_q72_dataproc_2_2.zstd", [eventlogs], max_items=5)
    durations = [s.duration_ms or 0 for s in summary.top_stages]
    assert len(durations) == 5 and durations == sorted(durations, reverse=True)
    assert len(summary.top_sql) == 5
    assert all(len(x.description or "") <= 200 for x in summary.top_sql)
    # stage totals add up to the application's
    full = summarize_event_log(f"{QUAL}/nds_q72_dataproc_2_2.zstd", [eventlogs], max_items=100)
    assert sum(s.input_bytes for s in full.top_stages) == full.totals.input_bytes > 0
    assert sum(s.task_count for s in full.top_stages) == full.counts.tasks
    assert "physical_plan" not in orjson.dumps(summary.model_dump()).decode()
    assert len(orjson.dumps(summary.model_dump())) < 20_000


def test_issues_point_at_the_bad_line(eventlogs: Path) -> None:
    summary = summarize_event_log(eventlogs / PROF / "malformed_json_eventlog.zstd", [eventlogs])
    assert summary.issues_total == 1
    [issue] = summary.issues
    assert issue.line is not None and "JSON" in issue.reason
    assert issue.path.endswith("malformed_json_eventlog.zstd")


def test_a_rolled_log_directory_is_one_application(eventlogs: Path) -> None:
    summary = summarize_event_log(f"{QUAL}/eventlog_v2_local-1623876083964", [eventlogs])
    assert summary.app_id == "local-1623876083964"
    assert summary.counts.tasks == 2672 + 129  # both parts, per the inventory
    assert summary.complete


def test_a_directory_of_several_logs_is_refused(eventlogs: Path) -> None:
    with pytest.raises(ConfigError, match=r"holds \d+ event logs .*summarise one at a time"):
        summarize_event_log(f"{QUAL}/multiple_attempts", [eventlogs])


def test_paths_outside_the_roots_are_refused(eventlogs: Path, tmp_path: Path) -> None:
    root = eventlogs / "sparklens"
    outside = eventlogs / "sparklint" / "spark_event_log_example"
    with pytest.raises(PathNotAllowed, match="outside the allowed roots"):
        summarize_event_log(outside, [root])
    with pytest.raises(PathNotAllowed, match="outside the allowed roots"):
        summarize_event_log("../sparklint/spark_event_log_example", [root])
    with pytest.raises(PathNotAllowed, match="no such file"):
        summarize_event_log("local-0000", [root])
    # a link inside a root to a log elsewhere, and a rolled log whose part links out
    (tmp_path / "link.log").symlink_to(outside)
    with pytest.raises(PathNotAllowed, match="outside"):
        summarize_event_log("link.log", [tmp_path])
    rolled = tmp_path / "eventlog_v2_app-1"
    rolled.mkdir()
    shutil.copy(outside, rolled / "events_1_app-1")
    (rolled / "events_2_app-1").symlink_to(outside)
    with pytest.raises(PathNotAllowed, match="events_2_app-1"):
        summarize_event_log(rolled, [tmp_path])


def test_max_items_bounds(eventlogs: Path) -> None:
    for bad in (0, 101):
        with pytest.raises(ConfigError, match="max_items must be between 1 and 100"):
            summarize_event_log("sparklens/local-1532512550423", [eventlogs], max_items=bad)
