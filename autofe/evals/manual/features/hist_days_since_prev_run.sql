-- name: hist_days_since_prev_run
-- category: history
-- value_type: DOUBLE
-- why: days since the job's previous submission (strictly earlier): data accumulated since, cold caches
WITH prev AS (
  -- the job's latest submission strictly before this run's
  SELECT t.run_id, h.submit_time
  FROM runs AS t
  ASOF JOIN runs AS h ON h.job_id = t.job_id AND h.submit_time < t.submit_time
)
SELECT t.run_id, epoch(t.submit_time - prev.submit_time) / 86400.0 AS value
FROM runs AS t
LEFT JOIN prev ON prev.run_id = t.run_id
