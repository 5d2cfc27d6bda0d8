-- name: cal_day_of_week
-- category: calendar
-- value_type: DOUBLE
-- why: weekly load cycles (ISO day 1 = Monday .. 7 = Sunday); read from submit_time
SELECT t.run_id, isodow(t.submit_time)::DOUBLE AS value
FROM runs AS t
