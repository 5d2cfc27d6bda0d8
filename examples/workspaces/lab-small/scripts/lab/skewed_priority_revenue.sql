SELECT
  o.o_orderpriority,
  l.l_returnflag,
  count(*) AS line_count,
  sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
  count(DISTINCT o.o_custkey) AS customers
FROM lineitem_skew l
JOIN orders_skew o ON o.o_orderkey = l.l_orderkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND o.o_ordermonth >= trunc(date_sub(DATE '${start}', 122), 'MM') AND o.o_ordermonth < DATE '${end}'
  AND o.o_orderdate >= date_sub(DATE '${start}', 122) AND o.o_orderdate < DATE '${end}'
  AND l.l_shipmode IN (${shipmodes})
GROUP BY o.o_orderpriority, l.l_returnflag
ORDER BY o.o_orderpriority, l.l_returnflag
