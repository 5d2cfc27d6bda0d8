-- name: hist_max_last10
-- category: history
-- value_type: DOUBLE
-- why: the slowest of the job's last 10 earlier-ended runs: a pessimistic bound
SELECT
  t.run_id,
  (
    SELECT max(x.duration_s)
    FROM (
      SELECT h.duration_s
      FROM runs AS h
      WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
      ORDER BY h.end_time DESC, h.run_id DESC
      LIMIT 10
    ) AS x
  ) AS value
FROM runs AS t
