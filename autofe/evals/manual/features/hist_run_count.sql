-- name: hist_run_count
-- category: history
-- value_type: DOUBLE
-- why: how much history the job has (runs ended before submit); new jobs behave differently
WITH ranked AS (
  -- how many of the job's runs had ended by each finished run's end (ties included)
  SELECT h.job_id, h.end_time,
    count(h.run_id) OVER (
      PARTITION BY h.job_id ORDER BY h.end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ended
  FROM runs AS h
  WHERE h.end_time IS NOT NULL
),
seen AS (
  -- the count at the latest end before this run's submit
  SELECT t.run_id, r.ended
  FROM runs AS t
  ASOF JOIN ranked AS r ON r.job_id = t.job_id AND r.end_time < t.submit_time
)
SELECT t.run_id, COALESCE(seen.ended, 0)::DOUBLE AS value
FROM runs AS t
LEFT JOIN seen ON seen.run_id = t.run_id
