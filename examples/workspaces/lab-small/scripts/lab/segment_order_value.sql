SELECT
  o.o_ordermonth AS order_month,
  o.o_orderpriority,
  count(*) AS order_count,
  avg(o.o_totalprice) AS avg_value,
  max(o.o_totalprice) AS max_value
FROM orders o
JOIN customer c ON c.c_custkey = o.o_custkey
WHERE o.o_ordermonth >= trunc(DATE '${start}', 'MM') AND o.o_ordermonth < DATE '${end}'
  AND o.o_orderdate >= DATE '${start}' AND o.o_orderdate < DATE '${end}'
  AND c.c_mktsegment = '${segment}'
GROUP BY 1, 2
ORDER BY 1, 2
