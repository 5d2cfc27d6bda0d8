-- name: script_num_joins
-- category: script-plan
-- value_type: DOUBLE
-- why: each JOIN (SQL JOIN or DataFrame .join) adds a shuffle or a broadcast
SELECT
  t.run_id,
  len(
    regexp_extract_all(COALESCE(t.script_text, j.script_text), '(?i)\bjoin\b')
  )::DOUBLE AS value
FROM runs AS t
LEFT JOIN jobs AS j ON j.job_id = t.job_id
