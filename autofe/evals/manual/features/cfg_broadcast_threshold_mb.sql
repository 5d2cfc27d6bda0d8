-- name: cfg_broadcast_threshold_mb
-- category: static-config
-- value_type: DOUBLE
-- why: spark.sql.autoBroadcastJoinThreshold (default 10 MB; -1 disables, shown as 0) decides broadcast vs shuffle joins
SELECT
  t.run_id,
  greatest(
    COALESCE(
      TRY_CAST(
        json_extract_string(c.spark_conf, '$."spark.sql.autoBroadcastJoinThreshold"') AS DOUBLE
      ),
      10485760.0
    ),
    0.0
  ) / 1048576.0 AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
