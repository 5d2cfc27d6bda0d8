-- name: hist_mean_last10
-- category: history
-- value_type: DOUBLE
-- why: mean of the job's last 10 runs that ended before submit: the job's typical runtime
SELECT
  t.run_id,
  (
    SELECT avg(x.duration_s)
    FROM (
      SELECT h.duration_s
      FROM runs AS h
      WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
      ORDER BY h.end_time DESC, h.run_id DESC
      LIMIT 10
    ) AS x
  ) AS value
FROM runs AS t
