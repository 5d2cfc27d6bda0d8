SELECT
  c.c_custkey,
  c.c_name,
  c.c_mktsegment,
  count(*) AS order_count,
  sum(o.o_totalprice) AS spend
FROM orders_skew o
JOIN customer c ON c.c_custkey = o.o_custkey
WHERE o.o_ordermonth >= trunc(DATE '${start}', 'MM') AND o.o_ordermonth < DATE '${end}'
  AND o.o_orderdate >= DATE '${start}' AND o.o_orderdate < DATE '${end}'
  AND c.c_mktsegment IN (${segments})
GROUP BY c.c_custkey, c.c_name, c.c_mktsegment
ORDER BY spend DESC
LIMIT ${top_k}
