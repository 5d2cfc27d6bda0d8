-- name: hist_max_last10
-- category: history
-- value_type: DOUBLE
-- why: the slowest of the job's last 10 earlier-ended runs: a pessimistic bound
WITH ranked AS (
  -- the job's finished runs in end order (run id breaks ties), how many had ended by each
  -- one's end (ties included), and each one's block of 10 ranks
  SELECT h.job_id, h.end_time, h.duration_s,
    row_number() OVER (PARTITION BY h.job_id ORDER BY h.end_time, h.run_id) AS rank,
    count(*) OVER (
      PARTITION BY h.job_id ORDER BY h.end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ended,
    (row_number() OVER (PARTITION BY h.job_id ORDER BY h.end_time, h.run_id) - 1) // 10 AS block
  FROM runs AS h
  WHERE h.end_time IS NOT NULL
),
seen AS (
  SELECT t.run_id, t.job_id, t.submit_time, r.ended
  FROM runs AS t
  ASOF JOIN ranked AS r ON r.job_id = t.job_id AND r.end_time < t.submit_time
),
wanted AS (
  -- the last 10 ranks up to that count lie in its block of 10 ranks or the one before
  SELECT s.run_id, s.job_id, s.submit_time, s.ended, (s.ended - 1) // 10 AS block
  FROM seen AS s
  UNION ALL
  SELECT s.run_id, s.job_id, s.submit_time, s.ended, (s.ended - 1) // 10 - 1 AS block
  FROM seen AS s
),
last_k AS (
  SELECT w.run_id, r.duration_s
  FROM wanted AS w
  JOIN ranked AS r
    ON r.job_id = w.job_id AND r.block = w.block
    AND r.rank > w.ended - 10 AND r.rank <= w.ended AND r.end_time < w.submit_time
)
SELECT t.run_id, max(l.duration_s) AS value
FROM runs AS t
LEFT JOIN last_k AS l ON l.run_id = t.run_id
GROUP BY t.run_id
