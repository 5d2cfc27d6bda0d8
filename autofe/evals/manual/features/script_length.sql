-- name: script_length
-- category: script-plan
-- value_type: DOUBLE
-- why: longer scripts do more work; the text is part of the job (or the run when it differs)
SELECT t.run_id, length(COALESCE(t.script_text, j.script_text))::DOUBLE AS value
FROM runs AS t
LEFT JOIN jobs AS j ON j.job_id = t.job_id
