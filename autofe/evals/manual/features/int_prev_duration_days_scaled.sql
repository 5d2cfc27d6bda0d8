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
)
SELECT t.run_id, p.duration_s * tv.v / nullif(pv.v, 0) AS value
FROM runs AS t
LEFT JOIN vol AS tv ON tv.run_id = t.run_id
LEFT JOIN LATERAL (
  SELECT h.run_id, h.duration_s
  FROM runs AS h
  WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
  ORDER BY h.end_time DESC, h.run_id DESC
  LIMIT 1
) AS p ON TRUE
LEFT JOIN vol AS pv ON pv.run_id = p.run_id
