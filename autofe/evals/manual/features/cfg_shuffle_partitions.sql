-- name: cfg_shuffle_partitions
-- category: static-config
-- value_type: DOUBLE
-- why: spark.sql.shuffle.partitions (default 200) sets reduce-side parallelism and task overhead
SELECT
  t.run_id,
  COALESCE(
    TRY_CAST(json_extract_string(c.spark_conf, '$."spark.sql.shuffle.partitions"') AS DOUBLE),
    200.0
  ) AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
