-- name: cfg_driver_memory_gb
-- category: static-config
-- value_type: DOUBLE
-- why: a small driver (spark.driver.memory, e.g. 1g/2g) collects and plans slowly or runs out of memory
WITH conf AS (
  SELECT
    c.config_id,
    lower(json_extract_string(c.spark_conf, '$."spark.driver.memory"')) AS mem
  FROM cluster_configs AS c
)
SELECT
  t.run_id,
  CASE
    WHEN conf.mem IS NULL THEN 1.0
    WHEN conf.mem LIKE '%t' THEN TRY_CAST(rtrim(conf.mem, 't') AS DOUBLE) * 1024
    WHEN conf.mem LIKE '%g' THEN TRY_CAST(rtrim(conf.mem, 'g') AS DOUBLE)
    WHEN conf.mem LIKE '%m' THEN TRY_CAST(rtrim(conf.mem, 'm') AS DOUBLE) / 1024
    WHEN conf.mem LIKE '%k' THEN TRY_CAST(rtrim(conf.mem, 'k') AS DOUBLE) / 1048576
    ELSE TRY_CAST(conf.mem AS DOUBLE) / 1073741824
  END AS value
FROM runs AS t
LEFT JOIN conf ON conf.config_id = t.cluster_config_id
