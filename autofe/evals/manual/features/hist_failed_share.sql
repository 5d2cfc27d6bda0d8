-- name: hist_failed_share
-- category: history
-- value_type: DOUBLE
-- why: share of the job's earlier-ended runs that did not succeed; flaky jobs retry and run long
SELECT
  t.run_id,
  avg(CASE WHEN h.status = 'SUCCEEDED' THEN 0.0 ELSE 1.0 END) AS value
FROM runs AS t
JOIN runs AS h ON h.job_id = t.job_id AND h.end_time < t.submit_time
GROUP BY t.run_id
