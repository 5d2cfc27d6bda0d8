-- name: hist_run_count
-- category: history
-- value_type: DOUBLE
-- why: how much history the job has (runs ended before submit); new jobs behave differently
SELECT t.run_id, count(h.run_id)::DOUBLE AS value
FROM runs AS t
LEFT JOIN runs AS h ON h.job_id = t.job_id AND h.end_time < t.submit_time
GROUP BY t.run_id
