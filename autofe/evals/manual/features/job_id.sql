-- name: job_id
-- category: script-plan
-- value_type: VARCHAR
-- why: the job identity captures everything constant about its workload
SELECT t.run_id, t.job_id AS value
FROM runs AS t
