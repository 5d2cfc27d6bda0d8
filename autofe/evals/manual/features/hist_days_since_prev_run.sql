-- name: hist_days_since_prev_run
-- category: history
-- value_type: DOUBLE
-- why: days since the job's previous submission (strictly earlier): data accumulated since, cold caches
SELECT t.run_id, epoch(t.submit_time - max(h.submit_time)) / 86400.0 AS value
FROM runs AS t
LEFT JOIN runs AS h ON h.job_id = t.job_id AND h.submit_time < t.submit_time
GROUP BY t.run_id, t.submit_time
