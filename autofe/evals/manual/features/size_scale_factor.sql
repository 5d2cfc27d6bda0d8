-- name: size_scale_factor
-- category: data-size
-- value_type: DOUBLE
-- why: the dataset scale factor (tag.lab_scale_factor) multiplies every table's size
SELECT t.run_id, a.value AS value
FROM runs AS t
LEFT JOIN run_attributes AS a
  ON a.run_id = t.run_id
  AND a.name = 'tag.lab_scale_factor'
  AND a.availability = 'known_at_submit'
