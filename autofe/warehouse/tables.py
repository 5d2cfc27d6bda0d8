"""The warehouse schema as data: every column carries its availability tag.

The leakage gate and the agents read these tags (mirrored into the ``column_catalog`` table), so
the schema is declared once here and both the DDL and ``docs/schema.md`` derive from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from autofe.schema import Availability

K = Availability.KNOWN_AT_SUBMIT
P = Availability.POST_EXECUTION


@dataclass(frozen=True)
class Column:
    """One column: SQL type, when it becomes known, and which timestamp orders that."""

    name: str
    type: str
    availability: Availability
    ordered_by: str
    doc: str


@dataclass(frozen=True)
class Table:
    """One warehouse table with its primary key."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]


def _cols(avail: Availability, ordered_by: str, *specs: tuple[str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(n, t, avail, ordered_by, d) for n, t, d in specs)


RUN_END = "runs.end_time"
APP_END = "applications.end_time (the run has ended)"

JOBS = Table(
    "jobs",
    "Recurring job definitions (what a user submits). Known before any run of the job.",
    _cols(
        K,
        "jobs.created_time",
        ("job_id", "VARCHAR", "Stable job identifier (Jobs API job_id, app name, or dataset job)."),
        ("name", "VARCHAR", "Human-readable job name."),
        ("task_type", "VARCHAR", "sql | python | notebook | jar | spark_submit | dataset."),
        ("script_path", "VARCHAR", "Path of the job's script inside the workspace, if any."),
        ("script_text", "VARCHAR", "Full text of the job's SQL / PySpark script, if available."),
        ("definition", "JSON", "The job definition as the source gave it (Jobs API settings)."),
        ("created_time", "TIMESTAMP", "When the job was defined (NULL if unknown)."),
        ("source", "VARCHAR", "Where the row came from: workspace, event_log or a mapping name."),
    ),
    ("job_id",),
)

RUNS = Table(
    "runs",
    "One execution of a job. The label for prediction is `duration_s`.",
    _cols(
        K,
        "runs.submit_time",
        ("run_id", "VARCHAR", "Unique run id."),
        ("job_id", "VARCHAR", "References jobs.job_id."),
        ("submit_time", "TIMESTAMP", "When the run was submitted: the prediction cutoff."),
        ("cluster_config_id", "VARCHAR", "References cluster_configs.config_id."),
        ("parameters", "JSON", "Run parameters chosen at submit (job params, dataset inputs)."),
        ("script_text", "VARCHAR", "Script text this run executed if it differs per run."),
        ("source", "VARCHAR", "workspace, event_log or the mapping name."),
    )
    + _cols(
        P,
        RUN_END,
        ("start_time", "TIMESTAMP", "When execution started (after queueing / cluster start)."),
        ("end_time", "TIMESTAMP", "When the run finished; orders every post-execution fact."),
        ("duration_s", "DOUBLE", "Label: wall-clock run duration in seconds."),
        ("status", "VARCHAR", "SUCCEEDED | FAILED | CANCELED | INCOMPLETE | ..."),
    ),
    ("run_id",),
)

CLUSTER_CONFIGS = Table(
    "cluster_configs",
    "Cluster configurations a run is submitted with (chosen before submit).",
    _cols(
        K,
        "runs.submit_time",
        ("config_id", "VARCHAR", "Content-derived id of the configuration."),
        ("node_type", "VARCHAR", "Worker instance type (e.g. m5.xlarge, Standard_DS3_v2)."),
        ("driver_node_type", "VARCHAR", "Driver instance type."),
        ("vcpu_per_node", "DOUBLE", "vCPUs of one worker."),
        ("memory_gb_per_node", "DOUBLE", "Memory (GiB) of one worker."),
        ("num_workers", "INTEGER", "Fixed worker count (NULL when autoscaling)."),
        ("autoscale_min", "INTEGER", "Autoscale lower bound."),
        ("autoscale_max", "INTEGER", "Autoscale upper bound."),
        ("spot_policy", "VARCHAR", "on_demand | spot | spot_with_fallback."),
        ("spark_version", "VARCHAR", "Spark / Databricks runtime version string."),
        ("spark_conf", "JSON", "spark.* settings of the cluster."),
        ("hourly_price", "DOUBLE", "Price of the whole cluster per hour in USD, if known."),
        ("source", "VARCHAR", "workspace, event_log or the mapping name."),
    ),
    ("config_id",),
)

APPLICATIONS = Table(
    "applications",
    "One Spark application (attempt) parsed from an event log; known only after the run.",
    _cols(
        P,
        APP_END,
        (
            "app_key",
            "VARCHAR",
            "app_id plus attempt: the identity used to replace a re-ingested log.",
        ),
        ("app_id", "VARCHAR", "Spark application id."),
        ("attempt_id", "VARCHAR", "Application attempt id (YARN), NULL otherwise."),
        ("run_id", "VARCHAR", "The run this application belongs to."),
        ("app_name", "VARCHAR", "spark.app.name."),
        ("spark_version", "VARCHAR", "Spark version from SparkListenerLogStart."),
        ("master", "VARCHAR", "spark.master."),
        ("spark_user", "VARCHAR", "User that ran the application."),
        ("start_time", "TIMESTAMP", "ApplicationStart timestamp."),
        ("end_time", "TIMESTAMP", "ApplicationEnd timestamp (NULL if the log has no end)."),
        ("duration_ms", "BIGINT", "end_time - start_time in ms."),
        ("complete", "BOOLEAN", "The log has an ApplicationEnd event."),
        ("num_jobs", "INTEGER", "Spark jobs started."),
        ("num_stages", "INTEGER", "Stage attempts completed or submitted."),
        ("num_tasks", "BIGINT", "TaskEnd events counted."),
        ("num_executors", "INTEGER", "Executors added over the application."),
        ("spark_properties", "JSON", "Spark properties from EnvironmentUpdate."),
        ("databricks_tags", "JSON", "spark.databricks.clusterUsageTags.* properties."),
        ("events", "BIGINT", "Events read."),
        ("unknown_events", "BIGINT", "Events of unknown type, counted and skipped."),
        ("bad_lines", "INTEGER", "Lines skipped as unparseable (see ingest_issues)."),
        ("source_path", "VARCHAR", "Path of the log (first part for rolled logs)."),
        ("content_hash", "VARCHAR", "Hash of the log's bytes."),
    ),
    ("app_key",),
)

SPARK_JOBS = Table(
    "spark_jobs",
    "Spark jobs (actions) inside an application.",
    _cols(
        P,
        APP_END,
        ("app_key", "VARCHAR", "References applications.app_key."),
        ("run_id", "VARCHAR", "The run the application belongs to."),
        ("job_id", "INTEGER", "Spark job id."),
        ("submit_time", "TIMESTAMP", "JobStart time."),
        ("completion_time", "TIMESTAMP", "JobEnd time."),
        ("duration_ms", "BIGINT", "completion - submission."),
        ("result", "VARCHAR", "JobSucceeded | JobFailed | NULL if never ended."),
        ("num_stages", "INTEGER", "Stages declared at JobStart."),
        ("stage_ids", "INTEGER[]", "Stage ids declared at JobStart."),
        ("sql_execution_id", "BIGINT", "spark.sql.execution.id property, if any."),
    ),
    ("app_key", "job_id"),
)

_STAGE_METRICS: tuple[tuple[str, str, str], ...] = (
    ("task_count", "BIGINT", "TaskEnd events of this stage attempt."),
    ("failed_tasks", "BIGINT", "Tasks that ended failed."),
    ("killed_tasks", "BIGINT", "Tasks that ended killed."),
    ("task_duration_sum_ms", "BIGINT", "Sum of task durations (finish - launch)."),
    ("task_duration_min_ms", "BIGINT", "Shortest task."),
    ("task_duration_p50_ms", "DOUBLE", "Median task duration."),
    ("task_duration_p90_ms", "DOUBLE", "90th percentile task duration."),
    ("task_duration_max_ms", "BIGINT", "Longest task (skew shows here)."),
    ("executor_run_time_ms", "BIGINT", "Sum of executor run time."),
    ("executor_cpu_time_ns", "BIGINT", "Sum of executor CPU time."),
    ("executor_deserialize_time_ms", "BIGINT", "Sum of executor deserialize time."),
    ("result_size_max", "BIGINT", "Largest task result."),
    ("gc_time_ms", "BIGINT", "Sum of JVM GC time."),
    ("peak_execution_memory_max", "BIGINT", "Largest task peak execution memory."),
    ("input_bytes", "BIGINT", "Bytes read from sources."),
    ("input_records", "BIGINT", "Records read from sources."),
    ("output_bytes", "BIGINT", "Bytes written to sinks."),
    ("output_records", "BIGINT", "Records written to sinks."),
    ("shuffle_read_bytes", "BIGINT", "Remote + local shuffle bytes read."),
    ("shuffle_read_records", "BIGINT", "Shuffle records read."),
    ("shuffle_fetch_wait_ms", "BIGINT", "Time waiting for shuffle fetches."),
    ("shuffle_write_bytes", "BIGINT", "Shuffle bytes written."),
    ("shuffle_write_records", "BIGINT", "Shuffle records written."),
    ("shuffle_write_time_ns", "BIGINT", "Shuffle write time."),
    ("memory_spilled_bytes", "BIGINT", "Memory bytes spilled."),
    ("disk_spilled_bytes", "BIGINT", "Disk bytes spilled."),
)

STAGES = Table(
    "stages",
    "Stage attempts with task-metric aggregates.",
    _cols(
        P,
        APP_END,
        ("app_key", "VARCHAR", "References applications.app_key."),
        ("run_id", "VARCHAR", "The run the application belongs to."),
        ("stage_id", "INTEGER", "Spark stage id."),
        ("attempt_id", "INTEGER", "Stage attempt."),
        ("name", "VARCHAR", "Stage name (call site)."),
        ("num_tasks", "INTEGER", "Tasks declared in StageInfo."),
        ("submission_time", "TIMESTAMP", "Stage submission."),
        ("completion_time", "TIMESTAMP", "Stage completion."),
        ("duration_ms", "BIGINT", "completion - submission."),
        ("status", "VARCHAR", "succeeded | failed | incomplete."),
        ("failure_reason", "VARCHAR", "Failure reason if the stage failed."),
    )
    + _cols(P, APP_END, *_STAGE_METRICS),
    ("app_key", "stage_id", "attempt_id"),
)

SQL_EXECUTIONS = Table(
    "sql_executions",
    "Spark SQL executions (queries) with their physical plans.",
    _cols(
        P,
        APP_END,
        ("app_key", "VARCHAR", "References applications.app_key."),
        ("run_id", "VARCHAR", "The run the application belongs to."),
        ("execution_id", "BIGINT", "SQL execution id."),
        ("root_execution_id", "BIGINT", "Root execution for nested executions (Spark 3.4+)."),
        ("description", "VARCHAR", "Query description (call site or SQL text)."),
        ("physical_plan", "VARCHAR", "Physical plan text at start."),
        ("final_plan", "VARCHAR", "Plan after the last adaptive (AQE) update, if any."),
        ("start_time", "TIMESTAMP", "Execution start."),
        ("end_time", "TIMESTAMP", "Execution end."),
        ("duration_ms", "BIGINT", "end - start."),
        ("error", "VARCHAR", "Error message if the execution failed (Spark 3.4+)."),
    ),
    ("app_key", "execution_id"),
)

EXECUTORS = Table(
    "executors",
    "Executors added and removed during an application.",
    _cols(
        P,
        APP_END,
        ("app_key", "VARCHAR", "References applications.app_key."),
        ("run_id", "VARCHAR", "The run the application belongs to."),
        ("executor_id", "VARCHAR", "Executor id ('driver' for the driver)."),
        ("host", "VARCHAR", "Host name."),
        ("total_cores", "INTEGER", "Cores of the executor."),
        ("add_time", "TIMESTAMP", "ExecutorAdded time."),
        ("remove_time", "TIMESTAMP", "ExecutorRemoved time."),
        ("remove_reason", "VARCHAR", "Removal reason (preemption, lost, idle...)."),
    ),
    ("app_key", "executor_id"),
)

TABLE_STATS = Table(
    "table_stats",
    "Snapshots of input table statistics; a row is known from its as_of time.",
    _cols(
        K,
        "table_stats.as_of",
        ("table_name", "VARCHAR", "Fully qualified table name."),
        ("as_of", "TIMESTAMP", "When the snapshot was taken; usable if at or before submit."),
        ("bytes", "BIGINT", "Table size in bytes."),
        ("row_count", "BIGINT", "Rows."),
        ("files", "BIGINT", "Data files."),
        ("partitions", "BIGINT", "Partitions."),
        ("source", "VARCHAR", "Where the snapshot came from."),
    ),
    ("table_name", "as_of"),
)

RUN_ATTRIBUTES = Table(
    "run_attributes",
    "Extra per-run facts from generic run tables; availability is per row (from the mapping).",
    (
        Column("run_id", "VARCHAR", K, "runs.submit_time", "References runs.run_id."),
        Column("name", "VARCHAR", K, "runs.submit_time", "Attribute name (source column)."),
        Column("value", "DOUBLE", K, "runs.submit_time", "Numeric value, if numeric."),
        Column("value_text", "VARCHAR", K, "runs.submit_time", "Text value, if not numeric."),
        Column(
            "availability",
            "VARCHAR",
            K,
            "runs.submit_time",
            "known_at_submit or post_execution: how value may be used (post: earlier runs only).",
        ),
    ),
    ("run_id", "name"),
)

INGESTED_FILES = Table(
    "ingested_files",
    "Bookkeeping: content hashes of ingested inputs, so re-ingesting adds nothing.",
    _cols(
        K,
        "ingested_files.ingested_at",
        ("content_hash", "VARCHAR", "Hash of the input's bytes."),
        ("path", "VARCHAR", "Path when ingested."),
        ("kind", "VARCHAR", "event_log | workspace_json | run_table | script."),
        ("ingested_at", "TIMESTAMP", "Wall-clock ingest time."),
    ),
    ("content_hash",),
)

INGEST_ISSUES = Table(
    "ingest_issues",
    "Bookkeeping: what ingest skipped and why (path, line, reason).",
    _cols(
        K,
        "ingest_issues.ingested_at",
        ("path", "VARCHAR", "Input path."),
        ("line", "BIGINT", "1-based line, if the issue is a line."),
        ("reason", "VARCHAR", "Why it was skipped."),
        ("fatal", "BOOLEAN", "The whole input was skipped."),
        ("ingested_at", "TIMESTAMP", "When ingest saw it."),
    ),
    (),
)

TABLES: tuple[Table, ...] = (
    JOBS,
    RUNS,
    CLUSTER_CONFIGS,
    APPLICATIONS,
    SPARK_JOBS,
    STAGES,
    SQL_EXECUTIONS,
    EXECUTORS,
    TABLE_STATS,
    RUN_ATTRIBUTES,
    INGESTED_FILES,
    INGEST_ISSUES,
)

STAGE_METRIC_COLUMNS: tuple[str, ...] = tuple(name for name, _, _ in _STAGE_METRICS)


def table(name: str) -> Table:
    """Look a table up by name.

    >>> table("runs").primary_key
    ('run_id',)
    """
    for t in TABLES:
        if t.name == name:
            return t
    raise KeyError(name)
