-- name: hist_last_duration
-- category: history
-- value_type: DOUBLE
-- why: the job's most recent finished run (ended strictly before submit) is the best single predictor
WITH ranked AS (
  -- the job's finished runs in end order (run id breaks ties), and how many had ended by
  -- each one's end (ties included)
  SELECT h.job_id, h.end_time, h.duration_s,
    row_number() OVER (PARTITION BY h.job_id ORDER BY h.end_time, h.run_id) AS rank,
    count(*) OVER (
      PARTITION BY h.job_id ORDER BY h.end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ended
  FROM runs AS h
  WHERE h.end_time IS NOT NULL
),
seen AS (
  SELECT t.run_id, t.job_id, t.submit_time, r.ended
  FROM runs AS t
  ASOF JOIN ranked AS r ON r.job_id = t.job_id AND r.end_time < t.submit_time
),
prev AS (
  -- the latest run of the job that ended before this one's submit
  SELECT s.run_id, r.duration_s
  FROM seen AS s
  JOIN ranked AS r
    ON r.job_id = s.job_id AND r.rank = s.ended AND r.end_time < s.submit_time
)
SELECT t.run_id, prev.duration_s AS value
FROM runs AS t
LEFT JOIN prev ON prev.run_id = t.run_id
