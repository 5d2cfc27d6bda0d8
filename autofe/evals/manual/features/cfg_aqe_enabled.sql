-- name: cfg_aqe_enabled
-- category: static-config
-- value_type: BOOLEAN
-- why: adaptive query execution (default on since Spark 3.2) coalesces partitions and fixes skewed joins
SELECT
  t.run_id,
  COALESCE(
    lower(json_extract_string(c.spark_conf, '$."spark.sql.adaptive.enabled"')) = 'true',
    TRUE
  ) AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
