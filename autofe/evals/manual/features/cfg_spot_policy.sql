-- name: cfg_spot_policy
-- category: static-config
-- value_type: VARCHAR
-- why: spot workers can be preempted and lose work, slowing the run
SELECT t.run_id, c.spot_policy AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
