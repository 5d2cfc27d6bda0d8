-- name: hist_last_duration_same_node_type
-- category: history
-- value_type: DOUBLE
-- why: the job's last earlier-ended run on the same worker node type, else its last earlier-ended run
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
),
typed AS (
  -- the same per job and worker node type (runs on a config of that node type)
  SELECT h.job_id, hc.node_type, h.end_time, h.duration_s,
    row_number() OVER (
      PARTITION BY h.job_id, hc.node_type ORDER BY h.end_time, h.run_id
    ) AS rank,
    count(*) OVER (
      PARTITION BY h.job_id, hc.node_type ORDER BY h.end_time
      RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ended
  FROM runs AS h
  JOIN cluster_configs AS hc ON hc.config_id = h.cluster_config_id
  WHERE h.end_time IS NOT NULL
),
targets AS (
  SELECT t.run_id, t.job_id, t.submit_time, c.node_type
  FROM runs AS t
  LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
),
seen_type AS (
  SELECT t.run_id, t.job_id, t.node_type, t.submit_time, r.ended
  FROM targets AS t
  ASOF JOIN typed AS r
    ON r.job_id = t.job_id AND r.node_type = t.node_type AND r.end_time < t.submit_time
),
prev_type AS (
  -- the latest run of the job on this run's node type that ended before its submit
  SELECT s.run_id, r.duration_s
  FROM seen_type AS s
  JOIN typed AS r
    ON r.job_id = s.job_id AND r.node_type = s.node_type
    AND r.rank = s.ended AND r.end_time < s.submit_time
)
SELECT t.run_id, COALESCE(prev_type.duration_s, prev.duration_s) AS value
FROM runs AS t
LEFT JOIN prev_type ON prev_type.run_id = t.run_id
LEFT JOIN prev ON prev.run_id = t.run_id
