-- name: job_name
-- category: script-plan
-- value_type: VARCHAR
-- why: the job name identifies the workload (and groups renamed or cloned jobs by name)
SELECT t.run_id, j.name AS value
FROM runs AS t
LEFT JOIN jobs AS j ON j.job_id = t.job_id
