-- name: cfg_total_cores
-- category: static-config
-- value_type: DOUBLE
-- why: total task slots (vCPUs x workers, a single-node cluster counts as one node) bound parallelism
SELECT t.run_id, c.vcpu_per_node * greatest(COALESCE(c.num_workers, 0), 1) AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
