SELECT
  l_shipdate AS ship_day,
  l_shipmode,
  l_returnflag,
  l_linestatus,
  count(*) AS line_count,
  sum(l_quantity) AS units,
  sum(l_extendedprice * (1 - l_discount)) AS net_revenue,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS billed
FROM lineitem
WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
  AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
  AND l_shipmode IN (${shipmodes})
GROUP BY l_shipdate, l_shipmode, l_returnflag, l_linestatus
ORDER BY ship_day, net_revenue DESC
