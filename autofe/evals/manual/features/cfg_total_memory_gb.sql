-- name: cfg_total_memory_gb
-- category: static-config
-- value_type: DOUBLE
-- why: cluster memory (GiB x nodes, at least one node) bounds what fits without spilling
SELECT t.run_id, c.memory_gb_per_node * greatest(COALESCE(c.num_workers, 0), 1) AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
