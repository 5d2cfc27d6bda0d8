-- name: int_input_mb_per_core
-- category: interaction
-- value_type: DOUBLE
-- why: input MB (latest snapshot before submit) per task slot approximates the work each core must do
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
),
sized AS (
  SELECT tabs.run_id, sum(s.bytes)::DOUBLE AS bytes
  FROM tabs
  JOIN table_stats AS s
    ON s.table_name = tabs.table_name
    AND s.as_of = (
      SELECT max(s2.as_of) FROM table_stats AS s2
      WHERE s2.table_name = tabs.table_name AND s2.as_of < tabs.submit_time
    )
  GROUP BY tabs.run_id
)
SELECT
  t.run_id,
  sized.bytes / 1048576.0 / nullif(c.vcpu_per_node * greatest(COALESCE(c.num_workers, 0), 1), 0) AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
LEFT JOIN sized ON sized.run_id = t.run_id
