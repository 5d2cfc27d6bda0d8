-- name: hist_failed_share
-- category: history
-- value_type: DOUBLE
-- why: share of the job's earlier-ended runs that did not succeed; flaky jobs retry and run long
WITH ranked AS (
  -- the job's finished runs in end order (run id breaks ties), how many had ended by each
  -- one's end and how many of those did not succeed (ties included)
  SELECT h.job_id, h.end_time,
    row_number() OVER (PARTITION BY h.job_id ORDER BY h.end_time, h.run_id) AS rank,
    count(*) OVER (
      PARTITION BY h.job_id ORDER BY h.end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ended,
    sum(CASE WHEN h.status = 'SUCCEEDED' THEN 0.0 ELSE 1.0 END) OVER (
      PARTITION BY h.job_id ORDER BY h.end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS failed
  FROM runs AS h
  WHERE h.end_time IS NOT NULL
),
seen AS (
  SELECT t.run_id, t.job_id, t.submit_time, r.ended
  FROM runs AS t
  ASOF JOIN ranked AS r ON r.job_id = t.job_id AND r.end_time < t.submit_time
)
-- the share over every run of the job that ended before this run was submitted
SELECT s.run_id, r.failed / r.ended AS value
FROM seen AS s
JOIN ranked AS r ON r.job_id = s.job_id AND r.rank = s.ended AND r.end_time < s.submit_time
