SELECT
  CASE
    WHEN l_discount < 0.03 THEN 'low'
    WHEN l_discount < 0.07 THEN 'mid'
    ELSE 'high'
  END AS discount_band,
  CAST(l_quantity / ${bucket} AS INT) AS quantity_bucket,
  count(*) AS line_count,
  sum(l_extendedprice * l_discount) AS discount_given,
  avg(l_extendedprice / l_quantity) AS avg_unit_price
FROM lineitem
WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
  AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
  AND l_quantity >= ${min_qty}
GROUP BY 1, 2
ORDER BY 1, 2
