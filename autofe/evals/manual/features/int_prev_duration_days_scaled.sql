-- name: int_prev_duration_days_scaled
-- category: interaction
-- value_type: DOUBLE
-- why: the last earlier-ended run's duration scaled by the ratio of data windows (days x scale factor)
WITH vol AS (
  SELECT
    r.run_id,
    TRY_CAST(json_extract_string(r.parameters, '$.notebook_params.days') AS DOUBLE)
      * COALESCE(a.value, 1.0) AS v
  FROM runs AS r
  LEFT JOIN run_attributes AS a
    ON a.run_id = r.run_id
    AND a.name = 'tag.lab_scale_factor'
    AND a.availability = 'known_at_submit'
),
ranked AS (
  -- the job's finished runs in end order (run id breaks ties), and how many had ended by
  -- each one's end (ties included)
  SELECT h.run_id, h.job_id, h.end_time, h.duration_s,
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
p AS (
  -- the latest run of the job that ended before this one's submit
  SELECT s.run_id AS target_id, r.run_id, r.duration_s
  FROM seen AS s
  JOIN ranked AS r
    ON r.job_id = s.job_id AND r.rank = s.ended AND r.end_time < s.submit_time
)
SELECT t.run_id, p.duration_s * tv.v / nullif(pv.v, 0) AS value
FROM runs AS t
LEFT JOIN vol AS tv ON tv.run_id = t.run_id
LEFT JOIN p ON p.target_id = t.run_id
LEFT JOIN vol AS pv ON pv.run_id = p.run_id
