-- name: cfg_local_cores
-- category: static-config
-- value_type: DOUBLE
-- why: on single-node clusters spark.master local[N] caps the task slots; local[*] uses every vCPU
WITH conf AS (
  SELECT
    c.config_id,
    c.vcpu_per_node,
    json_extract_string(c.spark_conf, '$."spark.master"') AS master
  FROM cluster_configs AS c
)
SELECT
  t.run_id,
  CASE
    WHEN conf.master IS NULL OR NOT starts_with(conf.master, 'local') THEN NULL
    WHEN conf.master = 'local' THEN 1.0
    WHEN regexp_matches(conf.master, '^local\[\*') THEN conf.vcpu_per_node
    ELSE TRY_CAST(regexp_extract(conf.master, '^local\[([0-9]+)', 1) AS DOUBLE)
  END AS value
FROM runs AS t
LEFT JOIN conf ON conf.config_id = t.cluster_config_id
