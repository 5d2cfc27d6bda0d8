SELECT
  p.p_container,
  count(*) AS line_count,
  percentile_approx(l.l_quantity, array(0.25, 0.5, 0.75)) AS quantity_quartiles,
  avg(l.l_extendedprice / l.l_quantity) AS avg_unit_price
FROM lineitem l
JOIN part p ON p.p_partkey = l.l_partkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND p.p_brand IN (${brands})
GROUP BY p.p_container
ORDER BY line_count DESC
