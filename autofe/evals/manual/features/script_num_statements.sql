-- name: script_num_statements
-- category: script-plan
-- value_type: DOUBLE
-- why: multi-statement scripts (DROP/CREATE/INSERT/SELECT) run several queries one after another
SELECT
  t.run_id,
  (
    len(
      regexp_extract_all(
        regexp_replace(COALESCE(t.script_text, j.script_text), '[\s;]+$', ''), ';'
      )
    ) + 1
  )::DOUBLE AS value
FROM runs AS t
LEFT JOIN jobs AS j ON j.job_id = t.job_id
WHERE COALESCE(t.script_text, j.script_text) IS NOT NULL
