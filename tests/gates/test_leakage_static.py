"""The static leakage check, case by case: what leaks (with the code and the column named) and
useful features that must pass. The shared fixture files run separately."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from autofe.featurespec import FeatureSpec
from autofe.gates.codes import Leakage
from autofe.gates.context import GateContext, Reason
from autofe.gates.leakage_static import check_static_leakage
from autofe.warehouse.catalog import code_catalog

CTX = GateContext(db=Path("unused"), catalog=code_catalog())


def check(sql: str) -> list[Reason]:
    return check_static_leakage(FeatureSpec(name="f", sql=sql, category="history"), CTX)


# (id, expected code, column the message must name, sql)
LEAKY: list[tuple[str, Leakage, str, str]] = [
    (
        "own_label",
        Leakage.LABEL,
        "duration_s",
        "SELECT run_id, duration_s AS value FROM runs",
    ),
    (
        "label_transform_in_cte_alias",
        Leakage.LABEL,
        "duration_s",
        """WITH r AS (SELECT run_id AS id, duration_s / 60 AS minutes FROM runs)
        SELECT id, ln(1 + minutes) FROM r""",
    ),
    (
        "label_via_self_join_on_run_id",
        Leakage.LABEL,
        "duration_s",
        """SELECT t.run_id, h.duration_s
        FROM runs t JOIN runs h ON h.run_id = t.run_id""",
    ),
    (
        "label_in_union_branch",
        Leakage.LABEL,
        "duration_s",
        """SELECT run_id, 0.0 AS value FROM runs WHERE job_id = 'a'
        UNION ALL
        SELECT run_id, duration_s FROM runs WHERE job_id <> 'a'""",
    ),
    (
        "label_through_exists",
        Leakage.LABEL,
        "duration_s",
        """SELECT t.run_id,
          CASE WHEN EXISTS (SELECT 1 FROM runs x WHERE x.run_id = t.run_id
                            AND x.duration_s > 600) THEN 1 ELSE 0 END
        FROM runs t""",
    ),
    (
        "label_through_in_list",
        Leakage.LABEL,
        "duration_s",
        """SELECT t.run_id,
          (t.run_id IN (SELECT run_id FROM runs WHERE duration_s > 600))::INT
        FROM runs t""",
    ),
    (
        "label_end_minus_start",
        Leakage.LABEL,
        "end_time",
        "SELECT run_id, date_diff('second', start_time, end_time) FROM runs",
    ),
    (
        "label_window_includes_current_row",
        Leakage.LABEL,
        "duration_s",
        """SELECT run_id, sum(duration_s) OVER (PARTITION BY job_id ORDER BY submit_time)
        FROM runs""",
    ),
    (
        "same_run_stage_shuffle",
        Leakage.SAME_RUN,
        "shuffle_read_bytes",
        """SELECT r.run_id, sum(s.shuffle_read_bytes)
        FROM runs r JOIN stages s ON s.run_id = r.run_id GROUP BY r.run_id""",
    ),
    (
        "same_run_plan_via_app_key",
        Leakage.SAME_RUN,
        "physical_plan",
        """SELECT r.run_id, max(length(e.physical_plan))
        FROM runs r
        JOIN applications a ON a.run_id = r.run_id
        JOIN sql_executions e ON e.app_key = a.app_key
        GROUP BY r.run_id""",
    ),
    (
        "same_run_status_filter",
        Leakage.SAME_RUN,
        "status",
        "SELECT run_id, 1.0 AS value FROM runs WHERE status = 'SUCCEEDED'",
    ),
    (
        "same_run_queue_delay",
        Leakage.SAME_RUN,
        "start_time",
        "SELECT run_id, epoch(start_time) - epoch(submit_time) FROM runs",
    ),
    (
        "same_run_attribute_untagged",
        Leakage.SAME_RUN,
        "value",
        """SELECT r.run_id, a.value FROM runs r
        LEFT JOIN run_attributes a ON a.run_id = r.run_id AND a.name = 'rows_written'""",
    ),
    (
        "same_run_executor_count_scalar",
        Leakage.SAME_RUN,
        "executor_id",
        """SELECT t.run_id,
          (SELECT count(DISTINCT x.executor_id) FROM executors x WHERE x.run_id = t.run_id)
        FROM runs t""",
    ),
    (
        "same_run_applications_end_is_not_enough",
        Leakage.SAME_RUN,
        "num_tasks",
        """SELECT t.run_id, a.num_tasks FROM runs t
        JOIN applications a ON a.run_id = t.run_id AND a.end_time IS NOT NULL""",
    ),
    (
        "inclusive_end_cutoff",
        Leakage.INCLUSIVE_CUTOFF,
        "duration_s",
        """SELECT t.run_id, (SELECT avg(h.duration_s) FROM runs h
          WHERE h.job_id = t.job_id AND h.end_time <= t.submit_time)
        FROM runs t""",
    ),
    (
        "inclusive_reversed_operands",
        Leakage.INCLUSIVE_CUTOFF,
        "duration_s",
        """SELECT t.run_id, max(h.duration_s) FROM runs t
        LEFT JOIN runs h ON h.job_id = t.job_id AND t.submit_time >= h.end_time
        GROUP BY t.run_id""",
    ),
    (
        "inclusive_between",
        Leakage.INCLUSIVE_CUTOFF,
        "status",
        """SELECT t.run_id, (SELECT avg((h.status = 'FAILED')::INT) FROM runs h
          WHERE h.job_id = t.job_id
            AND h.end_time BETWEEN t.submit_time - INTERVAL 30 DAY AND t.submit_time)
        FROM runs t""",
    ),
    (
        "inclusive_application_end",
        Leakage.INCLUSIVE_CUTOFF,
        "num_executors",
        """SELECT t.run_id, (SELECT max(a.num_executors) FROM applications a
          JOIN runs h ON h.run_id = a.run_id
          WHERE h.job_id = t.job_id AND a.end_time <= t.submit_time)
        FROM runs t""",
    ),
    (
        "unbounded_job_mean_joined_back",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """WITH m AS (SELECT job_id, avg(duration_s) AS mean_s FROM runs GROUP BY job_id)
        SELECT r.run_id, m.mean_s FROM runs r JOIN m USING (job_id)""",
    ),
    (
        "unbounded_self_join_excluding_self",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, avg(h.duration_s) FROM runs t
        JOIN runs h ON h.job_id = t.job_id AND h.run_id <> t.run_id GROUP BY t.run_id""",
    ),
    (
        "unbounded_submit_bound_only",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, (SELECT h.duration_s FROM runs h
          WHERE h.job_id = t.job_id AND h.submit_time < t.submit_time
          ORDER BY h.submit_time DESC LIMIT 1)
        FROM runs t""",
    ),
    (
        "unbounded_bound_under_or",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, (SELECT avg(h.duration_s) FROM runs h
          WHERE h.job_id = t.job_id AND (h.end_time < t.submit_time OR h.status = 'RUNNING'))
        FROM runs t""",
    ),
    (
        "unbounded_bound_in_having_only",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, avg(h.duration_s) FROM runs t
        JOIN runs h ON h.job_id = t.job_id
        GROUP BY t.run_id, t.submit_time HAVING max(h.end_time) < t.submit_time""",
    ),
    (
        "unbounded_order_by_post_value",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, (SELECT h.submit_time FROM runs h
          WHERE h.job_id = t.job_id AND h.submit_time < t.submit_time
          ORDER BY h.duration_s DESC LIMIT 1)::DATE::VARCHAR
        FROM runs t""",
    ),
    (
        "unbounded_stages_of_submit_bounded_runs",
        Leakage.UNBOUNDED_HISTORY,
        "spill",
        """SELECT t.run_id, (SELECT sum(s.disk_spilled_bytes) FROM stages s
          JOIN runs h ON h.run_id = s.run_id
          WHERE h.job_id = t.job_id AND h.submit_time < t.submit_time)
        FROM runs t""",
    ),
    (
        "unbounded_bound_on_cte_that_mixes_targets",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """WITH x AS (
          SELECT t.job_id, max(h.duration_s) AS m FROM runs t
          JOIN runs h ON h.job_id = t.job_id AND h.end_time < t.submit_time
          GROUP BY t.job_id)
        SELECT r.run_id, x.m FROM runs r JOIN x ON x.job_id = r.job_id""",
    ),
    (
        "unbounded_bound_later_than_submit",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, (SELECT avg(h.duration_s) FROM runs h
          WHERE h.job_id = t.job_id AND h.end_time < t.submit_time + INTERVAL 1 HOUR)
        FROM runs t""",
    ),
    (
        "unbounded_all_stages",
        Leakage.UNBOUNDED_HISTORY,
        "gc_time_ms",
        "SELECT r.run_id, (SELECT avg(s.gc_time_ms) FROM stages s) FROM runs r",
    ),
    (
        "future_job_run_count",
        Leakage.FUTURE_ROWS,
        "job_id",
        """SELECT t.run_id, (SELECT count(*) FROM runs h WHERE h.job_id = t.job_id)
        FROM runs t""",
    ),
    (
        "future_last_submit_of_job",
        Leakage.FUTURE_ROWS,
        "submit_time",
        """WITH last AS (SELECT job_id, max(submit_time) AS last_submit FROM runs
                      GROUP BY job_id)
        SELECT r.run_id, epoch(l.last_submit) - epoch(r.submit_time)
        FROM runs r JOIN last l ON l.job_id = r.job_id""",
    ),
    (
        "future_is_last_run",
        Leakage.FUTURE_ROWS,
        "submit_time",
        """SELECT t.run_id, CASE WHEN NOT EXISTS (SELECT 1 FROM runs x
          WHERE x.job_id = t.job_id AND x.submit_time > t.submit_time) THEN 1 ELSE 0 END
        FROM runs t""",
    ),
    (
        "future_later_runs_mean",
        Leakage.FUTURE_ROWS,
        "duration_s",
        """SELECT t.run_id, avg(h.duration_s) FROM runs t
        JOIN runs h ON h.job_id = t.job_id AND h.submit_time > t.submit_time
        GROUP BY t.run_id""",
    ),
    (
        "window_lead",
        Leakage.WINDOW_FUTURE,
        "submit_time",
        """SELECT run_id,
          epoch(lead(submit_time) OVER (PARTITION BY job_id ORDER BY submit_time))
          - epoch(submit_time)
        FROM runs""",
    ),
    (
        "window_lag_of_label",
        Leakage.WINDOW_FUTURE,
        "duration_s",
        "SELECT run_id, lag(duration_s) OVER (PARTITION BY job_id ORDER BY submit_time) FROM runs",
    ),
    (
        "window_whole_partition_count",
        Leakage.WINDOW_FUTURE,
        "job_id",
        "SELECT run_id, count(*) OVER (PARTITION BY job_id) FROM runs",
    ),
    (
        "window_following_frame",
        Leakage.WINDOW_FUTURE,
        "cluster_config_id",
        """SELECT run_id, count(DISTINCT cluster_config_id) OVER (
          PARTITION BY job_id ORDER BY submit_time
          ROWS BETWEEN 3 PRECEDING AND 1 FOLLOWING)
        FROM runs""",
    ),
    (
        "window_descending_rank",
        Leakage.WINDOW_FUTURE,
        "job_id",
        """SELECT run_id, row_number() OVER (PARTITION BY job_id ORDER BY submit_time DESC)
        FROM runs""",
    ),
    (
        "window_qualify_latest_only",
        Leakage.WINDOW_FUTURE,
        "job_id",
        """SELECT run_id, 1.0 AS value FROM runs
        QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY submit_time DESC) = 1""",
    ),
    (
        "window_lag_hidden_in_cte",
        Leakage.WINDOW_FUTURE,
        "shuffle",
        """WITH per_run AS (
          SELECT h.run_id, h.job_id, h.submit_time, sum(s.shuffle_write_bytes) AS shuffle
          FROM runs h JOIN stages s ON s.run_id = h.run_id
          GROUP BY h.run_id, h.job_id, h.submit_time),
        lagged AS (
          SELECT run_id, lag(shuffle) OVER (PARTITION BY job_id ORDER BY submit_time) AS prev
          FROM per_run)
        SELECT r.run_id, l.prev FROM runs r LEFT JOIN lagged l ON l.run_id = r.run_id""",
    ),
    (
        "window_ordered_by_end_time",
        Leakage.WINDOW_FUTURE,
        "end_time",
        """SELECT run_id, lag(submit_time) OVER (PARTITION BY job_id ORDER BY end_time)
        FROM runs""",
    ),
    (
        "late_latest_snapshot_overall",
        Leakage.LATE_SNAPSHOT,
        "bytes",
        """SELECT t.run_id, (SELECT s.bytes FROM table_stats s
          WHERE s.table_name = t.parameters ->> 'input_table'
          ORDER BY s.as_of DESC LIMIT 1)
        FROM runs t""",
    ),
    (
        "late_snapshot_up_to_now",
        Leakage.LATE_SNAPSHOT,
        "row_count",
        """SELECT t.run_id, (SELECT max(s.row_count) FROM table_stats s
          WHERE s.table_name = t.parameters ->> 'input_table' AND s.as_of <= now())
        FROM runs t""",
    ),
    (
        "late_snapshot_with_slack",
        Leakage.LATE_SNAPSHOT,
        "files",
        """SELECT t.run_id, (SELECT max(s.files) FROM table_stats s
          WHERE s.table_name = t.parameters ->> 'input_table'
            AND s.as_of < t.submit_time + INTERVAL 1 DAY)
        FROM runs t""",
    ),
    (
        "late_snapshot_pick_by_max_of_all",
        Leakage.LATE_SNAPSHOT,
        "bytes",
        """SELECT t.run_id, sum(s.bytes) FROM runs t
        JOIN jobs j ON j.job_id = t.job_id
        JOIN table_stats s ON contains(j.script_text, s.table_name)
        WHERE s.as_of = (SELECT max(x.as_of) FROM table_stats x
                         WHERE x.table_name = s.table_name)
        GROUP BY t.run_id""",
    ),
    (
        "bound_after_limit_is_not_a_row_filter",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, p.d FROM runs t
        JOIN (SELECT h.job_id, h.end_time, h.duration_s AS d FROM runs h
              ORDER BY h.duration_s DESC LIMIT 1) p
          ON p.job_id = t.job_id AND p.end_time < t.submit_time""",
    ),
    (
        "bound_on_group_max_end",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """WITH l AS (SELECT job_id, max(end_time) AS last_end, avg(duration_s) AS m
                   FROM runs GROUP BY job_id)
        SELECT r.run_id, l.m FROM runs r
        JOIN l ON l.job_id = r.job_id AND l.last_end < r.submit_time""",
    ),
    (
        "bound_in_aggregate_filter_only",
        Leakage.UNBOUNDED_HISTORY,
        "duration_s",
        """SELECT t.run_id, avg(h.duration_s) FILTER (WHERE h.end_time < t.submit_time)
        FROM runs t JOIN runs h ON h.job_id = t.job_id GROUP BY t.run_id""",
    ),
    (
        "columns_expression_reads_label",
        Leakage.LABEL,
        "duration_s",
        "SELECT run_id, COLUMNS('duration_s') FROM runs",
    ),
]


CLEAN: list[tuple[str, str]] = [
    (
        "cluster_total_vcpu",
        """SELECT t.run_id, c.num_workers * c.vcpu_per_node AS value
        FROM runs t JOIN cluster_configs c ON c.config_id = t.cluster_config_id""",
    ),
    (
        "cluster_memory_per_core",
        """SELECT t.run_id, c.memory_gb_per_node / nullif(c.vcpu_per_node, 0)
        FROM runs t LEFT JOIN cluster_configs c ON c.config_id = t.cluster_config_id""",
    ),
    (
        "run_parameter_input_gb",
        "SELECT run_id, TRY_CAST(parameters ->> 'input_gb' AS DOUBLE) FROM runs",
    ),
    (
        "run_attribute_known_at_submit",
        """SELECT r.run_id, a.value FROM runs r
        LEFT JOIN run_attributes a ON a.run_id = r.run_id AND a.name = 'data_size_MB'
          AND a.availability = 'known_at_submit'""",
    ),
    (
        "last_ended_run_duration",
        """SELECT t.run_id, (SELECT h.duration_s FROM runs h
          WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
          ORDER BY h.end_time DESC LIMIT 1)
        FROM runs t""",
    ),
    (
        "median_of_last_five_ended",
        """SELECT t.run_id, (SELECT median(x.d) FROM (
            SELECT h.duration_s AS d FROM runs h
            WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
            ORDER BY h.end_time DESC LIMIT 5) x)
        FROM runs t""",
    ),
    (
        "previous_run_shuffle_bytes",
        """SELECT t.run_id, (SELECT sum(s.shuffle_read_bytes) FROM stages s
          WHERE s.run_id = (SELECT h.run_id FROM runs h
                            WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
                            ORDER BY h.end_time DESC LIMIT 1))
        FROM runs t""",
    ),
    (
        "previous_run_shuffle_via_cte_and_qualify",
        """WITH prev AS (
          SELECT t.run_id AS target_id, h.run_id AS prev_id
          FROM runs t JOIN runs h ON h.job_id = t.job_id AND h.end_time < t.submit_time
          QUALIFY row_number() OVER (PARTITION BY t.run_id ORDER BY h.end_time DESC) = 1)
        SELECT r.run_id, sum(s.shuffle_read_bytes) FROM runs r
        LEFT JOIN prev p ON p.target_id = r.run_id
        LEFT JOIN stages s ON s.run_id = p.prev_id
        GROUP BY r.run_id""",
    ),
    (
        "earlier_submitted_run_count",
        """SELECT t.run_id, (SELECT count(*) FROM runs h
          WHERE h.job_id = t.job_id AND h.submit_time < t.submit_time)
        FROM runs t""",
    ),
    (
        "hours_since_last_run_ended",
        """SELECT t.run_id, date_diff('hour', (SELECT max(h.end_time) FROM runs h
          WHERE h.job_id = t.job_id AND h.end_time < t.submit_time), t.submit_time)
        FROM runs t""",
    ),
    (
        "latest_snapshot_at_or_before_submit",
        """SELECT t.run_id, (SELECT s.bytes FROM table_stats s
          WHERE s.table_name = t.parameters ->> 'input_table' AND s.as_of < t.submit_time
          ORDER BY s.as_of DESC LIMIT 1)
        FROM runs t""",
    ),
    (
        "latest_snapshot_by_max_before_submit",
        """SELECT t.run_id, sum(s.bytes) FROM runs t
        JOIN jobs j ON j.job_id = t.job_id
        JOIN table_stats s ON contains(j.script_text, s.table_name)
        WHERE s.as_of = (SELECT max(x.as_of) FROM table_stats x
                         WHERE x.table_name = s.table_name AND x.as_of < t.submit_time)
        GROUP BY t.run_id""",
    ),
    ("day_of_week", "SELECT run_id, dayofweek(submit_time)::DOUBLE FROM runs"),
    ("hour_of_submit", "SELECT t.run_id, hour(t.submit_time) FROM runs AS t"),
    (
        "duration_trend_over_ended_runs",
        """SELECT t.run_id, (SELECT regr_slope(h.duration_s, epoch(h.submit_time)) FROM runs h
          WHERE h.job_id = t.job_id AND h.end_time < t.submit_time)
        FROM runs t""",
    ),
    (
        "previous_run_task_skew",
        """SELECT t.run_id, (SELECT max(s.task_duration_max_ms / nullif(s.task_duration_p50_ms, 0))
          FROM stages s JOIN runs h ON h.run_id = s.run_id
          WHERE h.job_id = t.job_id AND h.end_time = (
            SELECT max(h2.end_time) FROM runs h2
            WHERE h2.job_id = t.job_id AND h2.end_time < t.submit_time))
        FROM runs t""",
    ),
    (
        "failure_rate_lateral",
        """SELECT t.run_id, p.rate FROM runs t,
          LATERAL (SELECT avg((h.status <> 'SUCCEEDED')::INT) AS rate FROM runs h
                   WHERE h.job_id = t.job_id AND h.end_time < t.submit_time) p""",
    ),
    (
        "history_join_group_by_target",
        """SELECT t.run_id, avg(h.duration_s) FROM runs t
        LEFT JOIN runs h ON h.job_id = t.job_id
          AND h.end_time < t.submit_time - INTERVAL 1 HOUR
        GROUP BY t.run_id""",
    ),
    (
        "bound_through_epoch",
        """SELECT t.run_id, (SELECT avg(h.duration_s) FROM runs h
          WHERE h.job_id = t.job_id AND epoch(h.end_time) < epoch(t.submit_time))
        FROM runs t""",
    ),
    (
        "run_index_window",
        "SELECT run_id, row_number() OVER (PARTITION BY job_id ORDER BY submit_time) FROM runs",
    ),
    (
        "gap_since_previous_submission",
        """SELECT run_id, epoch(submit_time)
          - epoch(lag(submit_time) OVER (PARTITION BY job_id ORDER BY submit_time))
        FROM runs""",
    ),
    (
        "window_over_already_bounded_rows",
        """SELECT t.run_id, (SELECT avg(abs(d.delta)) FROM (
            SELECT h.duration_s - lag(h.duration_s) OVER (ORDER BY h.end_time) AS delta
            FROM runs h WHERE h.job_id = t.job_id AND h.end_time < t.submit_time) d)
        FROM runs t""",
    ),
    (
        "first_run_of_job_flag",
        """SELECT t.run_id, CASE WHEN NOT EXISTS (SELECT 1 FROM runs x
          WHERE x.job_id = t.job_id AND x.submit_time < t.submit_time) THEN 1 ELSE 0 END
        FROM runs t""",
    ),
    (
        "previous_app_executors",
        """SELECT t.run_id, (SELECT max(a.num_executors) FROM applications a
          JOIN runs h ON h.run_id = a.run_id
          WHERE h.job_id = t.job_id AND a.end_time < t.submit_time)
        FROM runs t""",
    ),
    (
        "same_config_or_same_job_union",
        """WITH hist AS (
          SELECT t.run_id AS id, h.duration_s AS d FROM runs t
          JOIN runs h ON h.cluster_config_id = t.cluster_config_id
            AND h.end_time < t.submit_time
          UNION ALL
          SELECT t.run_id, h.duration_s FROM runs t
          JOIN runs h ON h.job_id = t.job_id AND h.end_time < t.submit_time)
        SELECT r.run_id, avg(x.d) FROM runs r LEFT JOIN hist x ON x.id = r.run_id
        GROUP BY r.run_id""",
    ),
    (
        "job_task_type_static",
        """SELECT r.run_id, (j.task_type = 'sql')::INT FROM runs r
        JOIN jobs j ON j.job_id = r.job_id""",
    ),
    (
        "asof_snapshot_join",
        """SELECT t.run_id, s.row_count FROM runs t
        ASOF LEFT JOIN table_stats s ON s.table_name = t.parameters ->> 'input_table'
          AND t.submit_time > s.as_of""",
    ),
    (
        "post_attribute_of_earlier_runs",
        """SELECT t.run_id, (SELECT avg(a.value) FROM run_attributes a
          JOIN runs h ON h.run_id = a.run_id
          WHERE a.name = 'rows_written' AND h.job_id = t.job_id
            AND h.end_time < t.submit_time)
        FROM runs t""",
    ),
    (
        "unread_cte_column_does_not_count",
        """WITH r AS (SELECT * FROM runs) SELECT r.run_id, hour(r.submit_time) FROM r""",
    ),
    (
        "bound_pushed_into_rowwise_derived_table",
        """SELECT t.run_id, avg(p.d) FROM runs t
        JOIN (SELECT h.job_id, h.end_time, h.duration_s AS d FROM runs h
              WHERE h.status = 'SUCCEEDED') p
          ON p.job_id = t.job_id AND p.end_time < t.submit_time
        GROUP BY t.run_id""",
    ),
    (
        "first_ended_run_of_job_then_bounded",
        """WITH first AS (SELECT job_id, end_time, duration_s FROM runs
          QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY end_time) = 1)
        SELECT t.run_id, f.duration_s FROM runs t
        LEFT JOIN first f ON f.job_id = t.job_id AND f.end_time < t.submit_time""",
    ),
    (
        "history_of_an_earlier_run_is_earlier",
        """SELECT t.run_id, avg(h.duration_s) FROM runs t
        JOIN runs p ON p.job_id = t.job_id AND p.end_time < t.submit_time
        JOIN runs h ON h.job_id = p.job_id AND h.end_time < p.submit_time
        GROUP BY t.run_id""",
    ),
]


@pytest.mark.parametrize(
    ("code", "column", "sql"), [c[1:] for c in LEAKY], ids=[c[0] for c in LEAKY]
)
def test_rejects_leak(code: Leakage, column: str, sql: str) -> None:
    reasons = check(sql)
    matching = [r for r in reasons if r.code == code]
    assert matching, [(r.code, r.column) for r in reasons]
    assert any(column in r.message and r.column and column in r.column for r in matching)
    assert all(r.gate == "leakage" for r in reasons)


@pytest.mark.parametrize("sql", [c[1] for c in CLEAN], ids=[c[0] for c in CLEAN])
def test_admits_clean_feature(sql: str) -> None:
    assert check(sql) == []


def test_case_tables_are_big_enough() -> None:
    assert len(LEAKY) >= 25 and len(CLEAN) >= 20
    assert {code for _, code, _, _ in LEAKY} == set(Leakage) - {Leakage.PERTURBATION}


def test_span_points_at_the_offending_column() -> None:
    sql = "SELECT t.run_id, ln(t.duration_s) AS value FROM runs AS t"
    (reason,) = check(sql)
    assert reason.span is not None
    assert sql[reason.span[0] : reason.span[1]] == "t.duration_s"


def test_star_expanded_column_is_located_by_its_outer_reference() -> None:
    sql = "WITH r AS (SELECT * FROM runs) SELECT r.run_id, r.duration_s FROM r"
    (reason,) = check(sql)
    assert reason.code == Leakage.LABEL
    assert reason.span is not None
    assert sql[reason.span[0] : reason.span[1]] == "r.duration_s"


def test_message_suggests_the_strict_bound() -> None:
    (reason,) = [r for r in check(LEAKY_SQL["inclusive_end_cutoff"]) if r.code]
    assert "end_time < t.submit_time" in reason.message


SNAPSHOT_FEATURE = """SELECT t.run_id, (SELECT max(s.files) FROM table_stats s
  WHERE s.table_name = t.parameters ->> 'input_table' AND {bound})
FROM runs t"""


@pytest.mark.parametrize(
    "bound",
    [
        "s.as_of <= t.submit_time",
        "t.submit_time >= s.as_of",
        "NOT (s.as_of > t.submit_time)",
        "s.as_of BETWEEN t.submit_time - INTERVAL 7 DAY AND t.submit_time",
        "s.as_of < t.submit_time",
        "s.as_of <= t.submit_time - INTERVAL 1 HOUR",
    ],
)
def test_a_snapshot_taken_at_or_before_submission_is_admitted(bound: str) -> None:
    assert check(SNAPSHOT_FEATURE.format(bound=bound)) == []


@pytest.mark.parametrize(
    "bound",
    [
        "s.as_of <= t.submit_time + INTERVAL 1 DAY",
        "s.as_of <= t.submit_time OR s.files > 0",
        "s.as_of >= t.submit_time",
        "TRUE",
    ],
)
def test_a_snapshot_not_bounded_by_submission_is_late(bound: str) -> None:
    (reason,) = check(SNAPSHOT_FEATURE.format(bound=bound))
    assert reason.code == Leakage.LATE_SNAPSHOT and reason.column == "table_stats.files"


@pytest.mark.parametrize(
    "late",
    [
        SNAPSHOT_FEATURE.format(bound="TRUE"),
        SNAPSHOT_FEATURE.format(bound="s.as_of <= t.submit_time + INTERVAL 1 DAY"),
    ],
    ids=["unbounded", "a_day_late"],
)
def test_the_late_snapshot_advice_when_followed_passes(late: str) -> None:
    (reason,) = check(late)
    advised = re.search(
        r"; add (s\.as_of <= t\.submit_time) where those rows are read", reason.message
    )
    assert advised, reason.message
    assert "not limited to as_of <= t.submit_time" in reason.message
    assert check(late.replace(" AND ", f" AND {advised[1]} AND ")) == []


def test_window_message_explains_overlap() -> None:
    reasons = check(LEAKY_SQL["window_lag_of_label"])
    window = next(r for r in reasons if r.code == Leakage.WINDOW_FUTURE)
    assert "overlap" in window.message and "correlated subquery" in window.message


def test_unknown_target_is_said() -> None:
    reasons = check("SELECT job_id AS run_id, count(*) OVER () FROM runs")
    assert reasons and "does not trace to a run_id" in reasons[0].message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT run_id, nope FROM runs",
        "SELECT FROM WHERE",
        "SELECT run_id, 1 FROM runs; SELECT run_id, 2 FROM runs",
        "INSERT INTO runs VALUES (1)",
        "SELECT x.run_id, x.duration_s FROM not_a_table x",
    ],
)
def test_sql_the_completeness_gate_reports_yields_nothing(sql: str) -> None:
    assert check(sql) == []


def test_a_cte_read_twice_is_reported_once_per_place() -> None:
    sql = """WITH m AS (SELECT job_id, avg(duration_s) AS a FROM runs GROUP BY job_id)
    SELECT r.run_id, m1.a + m2.a FROM runs r
    JOIN m m1 ON m1.job_id = r.job_id JOIN m m2 ON m2.job_id = r.job_id"""
    reasons = check(sql)
    assert [r.code for r in reasons] == [Leakage.UNBOUNDED_HISTORY]


def test_a_few_milliseconds_per_feature() -> None:
    sqls = [sql for _, _, _, sql in LEAKY] + [sql for _, sql in CLEAN]
    start = time.perf_counter()
    for sql in sqls:
        check(sql)
    assert (time.perf_counter() - start) / len(sqls) < 0.05


LEAKY_SQL = {name: sql for name, _, _, sql in LEAKY}
