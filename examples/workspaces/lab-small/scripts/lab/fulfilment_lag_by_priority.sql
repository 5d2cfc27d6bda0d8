SELECT
  o.o_orderpriority,
  l.l_shipmode,
  count(*) AS line_count,
  avg(datediff(l.l_shipdate, o.o_orderdate)) AS avg_days_to_ship,
  avg(datediff(l.l_receiptdate, o.o_orderdate)) AS avg_days_to_receive,
  percentile_approx(datediff(l.l_receiptdate, o.o_orderdate), 0.9) AS p90_days_to_receive
FROM orders o
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
WHERE o.o_ordermonth >= trunc(DATE '${start}', 'MM') AND o.o_ordermonth < DATE '${end}'
  AND o.o_orderdate >= DATE '${start}' AND o.o_orderdate < DATE '${end}'
  AND l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < date_add(DATE '${end}', 122)
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < date_add(DATE '${end}', 122)
  AND o.o_orderpriority IN (${priorities})
GROUP BY o.o_orderpriority, l.l_shipmode
ORDER BY o.o_orderpriority, l.l_shipmode
