-- name: int_window_days_x_scale_factor
-- category: interaction
-- value_type: DOUBLE
-- why: rows in the date window grow with both its length (days) and the scale factor
SELECT
  t.run_id,
  TRY_CAST(json_extract_string(t.parameters, '$.notebook_params.days') AS DOUBLE) * a.value AS value
FROM runs AS t
LEFT JOIN run_attributes AS a
  ON a.run_id = t.run_id
  AND a.name = 'tag.lab_scale_factor'
  AND a.availability = 'known_at_submit'
