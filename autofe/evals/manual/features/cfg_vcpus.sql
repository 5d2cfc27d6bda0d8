-- name: cfg_vcpus
-- category: static-config
-- value_type: DOUBLE
-- why: more cores per node finish parallel stages sooner
SELECT t.run_id, c.vcpu_per_node AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
