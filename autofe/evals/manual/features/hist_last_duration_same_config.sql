-- name: hist_last_duration_same_config
-- category: history
-- value_type: DOUBLE
-- why: the job's last earlier-ended run on the same cluster config, else its last earlier-ended run on any config
WITH ranked AS (
  -- the job's finished runs in end order (run id breaks ties), and how many had ended by
  -- each one's end (ties included): over the job (any config) and per config
  SELECT h.job_id, h.cluster_config_id, h.end_time, h.duration_s,
    row_number() OVER (PARTITION BY h.job_id ORDER BY h.end_time, h.run_id) AS rank,
    count(*) OVER (
      PARTITION BY h.job_id ORDER BY h.end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ended,
    row_number() OVER (
      PARTITION BY h.job_id, h.cluster_config_id ORDER BY h.end_time, h.run_id
    ) AS config_rank,
    count(*) OVER (
      PARTITION BY h.job_id, h.cluster_config_id ORDER BY h.end_time
      RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS config_ended
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
),
seen_config AS (
  SELECT t.run_id, t.job_id, t.cluster_config_id, t.submit_time, r.config_ended
  FROM runs AS t
  ASOF JOIN ranked AS r
    ON r.job_id = t.job_id AND r.cluster_config_id = t.cluster_config_id
    AND r.end_time < t.submit_time
),
prev_config AS (
  -- the latest run of the job on this run's config that ended before its submit
  SELECT s.run_id, r.duration_s
  FROM seen_config AS s
  JOIN ranked AS r
    ON r.job_id = s.job_id AND r.cluster_config_id = s.cluster_config_id
    AND r.config_rank = s.config_ended AND r.end_time < s.submit_time
)
SELECT t.run_id, COALESCE(prev_config.duration_s, prev.duration_s) AS value
FROM runs AS t
LEFT JOIN prev_config ON prev_config.run_id = t.run_id
LEFT JOIN prev ON prev.run_id = t.run_id
