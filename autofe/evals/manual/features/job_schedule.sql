-- name: job_schedule
-- category: script-plan
-- value_type: VARCHAR
-- why: the schedule tag (hourly, daily, weekly, adhoc) in the job definition hints at the job's weight
SELECT t.run_id, json_extract_string(j.definition, '$.tags.lab_schedule') AS value
FROM runs AS t
LEFT JOIN jobs AS j ON j.job_id = t.job_id
