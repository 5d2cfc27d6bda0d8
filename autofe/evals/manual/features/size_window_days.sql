-- name: size_window_days
-- category: data-size
-- value_type: DOUBLE
-- why: the date-window parameter (notebook_params.days) sets how much of each table the job reads
SELECT
  t.run_id,
  TRY_CAST(json_extract_string(t.parameters, '$.notebook_params.days') AS DOUBLE) AS value
FROM runs AS t
