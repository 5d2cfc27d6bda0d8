WITH ordered AS (
  SELECT
    o_custkey,
    o_orderdate,
    lag(o_orderdate) OVER (PARTITION BY o_custkey ORDER BY o_orderdate, o_orderkey) AS previous_date
  FROM orders
  WHERE o_ordermonth >= trunc(DATE '${start}', 'MM') AND o_ordermonth < DATE '${end}'
    AND o_orderdate >= DATE '${start}' AND o_orderdate < DATE '${end}'
)
SELECT
  c.c_mktsegment,
  count(*) AS repeat_orders,
  avg(datediff(od.o_orderdate, od.previous_date)) AS avg_gap_days,
  max(datediff(od.o_orderdate, od.previous_date)) AS max_gap_days
FROM ordered od
JOIN customer c ON c.c_custkey = od.o_custkey
WHERE od.previous_date IS NOT NULL
  AND c.c_acctbal >= ${min_acctbal}
GROUP BY c.c_mktsegment
ORDER BY c.c_mktsegment
