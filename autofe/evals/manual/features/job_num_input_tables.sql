-- name: job_num_input_tables
-- category: script-plan
-- value_type: DOUBLE
-- why: each extra input table (lab_tables tag of the job definition) adds a scan and usually a join
SELECT
  t.run_id,
  len(string_split(json_extract_string(j.definition, '$.tags.lab_tables'), ','))::DOUBLE AS value
FROM runs AS t
LEFT JOIN jobs AS j ON j.job_id = t.job_id
