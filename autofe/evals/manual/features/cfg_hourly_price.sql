-- name: cfg_hourly_price
-- category: static-config
-- value_type: DOUBLE
-- why: the cluster's hourly price tracks its size and instance class (from the config, else the price tag)
SELECT t.run_id, COALESCE(c.hourly_price, a.value) AS value
FROM runs AS t
LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
LEFT JOIN run_attributes AS a
  ON a.run_id = t.run_id
  AND a.name = 'tag.lab_hourly_price_usd'
  AND a.availability = 'known_at_submit'
