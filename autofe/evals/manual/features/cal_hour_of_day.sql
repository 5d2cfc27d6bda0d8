-- name: cal_hour_of_day
-- category: calendar
-- value_type: DOUBLE
-- why: shared infrastructure is busier at some hours; read from submit_time
SELECT t.run_id, hour(t.submit_time)::DOUBLE AS value
FROM runs AS t
