WITH per_order AS (
  SELECT l_orderkey, count(*) AS line_count, sum(l_quantity) AS units
  FROM lineitem
  WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
    AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
  GROUP BY l_orderkey
)
SELECT
  po.line_count,
  o.o_orderstatus,
  count(*) AS order_count,
  avg(po.units) AS avg_units,
  avg(o.o_totalprice) AS avg_total
FROM per_order po
JOIN orders o ON o.o_orderkey = po.l_orderkey
WHERE o.o_totalprice >= ${min_total}
GROUP BY po.line_count, o.o_orderstatus
ORDER BY po.line_count, o.o_orderstatus
