-- name: cal_weekend
-- category: calendar
-- value_type: BOOLEAN
-- why: weekend runs meet idle shared services; from submit_time
SELECT t.run_id, isodow(t.submit_time) IN (6, 7) AS value
FROM runs AS t
