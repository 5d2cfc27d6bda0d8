-- name: hist_last_duration_same_config
-- category: history
-- value_type: DOUBLE
-- why: the job's last earlier-ended run on the same cluster config, else its last earlier-ended run on any config
SELECT
  t.run_id,
  COALESCE(
    (
      SELECT h.duration_s FROM runs AS h
      WHERE h.job_id = t.job_id
        AND h.cluster_config_id = t.cluster_config_id
        AND h.end_time < t.submit_time
      ORDER BY h.end_time DESC, h.run_id DESC
      LIMIT 1
    ),
    (
      SELECT h2.duration_s FROM runs AS h2
      WHERE h2.job_id = t.job_id AND h2.end_time < t.submit_time
      ORDER BY h2.end_time DESC, h2.run_id DESC
      LIMIT 1
    )
  ) AS value
FROM runs AS t
