SELECT
  l_shipmode,
  l_returnflag,
  count(*) AS line_count,
  sum(l_quantity) AS units,
  sum(l_extendedprice * (1 - l_discount)) AS net_revenue,
  avg(l_tax) AS avg_tax
FROM lineitem
WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
  AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
  AND l_shipmode IN (${shipmodes})
GROUP BY l_shipmode, l_returnflag
ORDER BY net_revenue DESC
