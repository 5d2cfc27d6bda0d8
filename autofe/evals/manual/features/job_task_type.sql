-- name: job_task_type
-- category: script-plan
-- value_type: VARCHAR
-- why: SQL notebooks, PySpark scripts and jars have different startup and execution profiles
SELECT t.run_id, j.task_type AS value
FROM runs AS t
LEFT JOIN jobs AS j ON j.job_id = t.job_id
