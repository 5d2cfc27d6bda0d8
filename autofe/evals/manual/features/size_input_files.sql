-- name: size_input_files
-- category: data-size
-- value_type: DOUBLE
-- why: data files of the job's input tables in the latest snapshot before submit: scan tasks and listing overhead
WITH tabs AS (
  SELECT
    t.run_id,
    t.submit_time,
    'tpch_sf' || CAST(a.value AS INTEGER) || '.' || trim(tname) AS table_name
  FROM runs AS t
  JOIN jobs AS j ON j.job_id = t.job_id
  JOIN run_attributes AS a
    ON a.run_id = t.run_id
    AND a.name = 'tag.lab_scale_factor'
    AND a.availability = 'known_at_submit'
  CROSS JOIN unnest(string_split(json_extract_string(j.definition, '$.tags.lab_tables'), ',')) AS u(tname)
)
SELECT t.run_id, sum(s.files)::DOUBLE AS value
FROM runs AS t
LEFT JOIN tabs ON tabs.run_id = t.run_id
LEFT JOIN table_stats AS s
  ON s.table_name = tabs.table_name
  AND s.as_of = (
    SELECT max(s2.as_of) FROM table_stats AS s2
    WHERE s2.table_name = tabs.table_name AND s2.as_of < t.submit_time
  )
GROUP BY t.run_id
