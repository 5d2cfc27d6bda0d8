-- name: hist_last_duration
-- category: history
-- value_type: DOUBLE
-- why: the job's most recent finished run (ended strictly before submit) is the best single predictor
SELECT
  t.run_id,
  (
    SELECT h.duration_s
    FROM runs AS h
    WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
    ORDER BY h.end_time DESC, h.run_id DESC
    LIMIT 1
  ) AS value
FROM runs AS t
