-- name: cfg_node_type
-- category: static-config
-- value_type: VARCHAR
-- why: the instance family (compute-, memory-optimised, generation) changes per-core speed and I/O
SELECT t.run_id, c.node_type AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
