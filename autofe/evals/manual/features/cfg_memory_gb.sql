-- name: cfg_memory_gb
-- category: static-config
-- value_type: DOUBLE
-- why: worker memory decides caching and spilling
SELECT t.run_id, c.memory_gb_per_node AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
