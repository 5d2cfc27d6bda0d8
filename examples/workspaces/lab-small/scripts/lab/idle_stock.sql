WITH sold AS (
  SELECT DISTINCT l_partkey, l_suppkey
  FROM lineitem
  WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
    AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
)
SELECT
  s.s_name,
  count(*) AS idle_parts,
  sum(ps.ps_availqty * ps.ps_supplycost) AS idle_value
FROM partsupp ps
JOIN supplier s ON s.s_suppkey = ps.ps_suppkey
LEFT ANTI JOIN sold ON sold.l_partkey = ps.ps_partkey AND sold.l_suppkey = ps.ps_suppkey
WHERE ps.ps_availqty >= ${min_availqty}
GROUP BY s.s_name
ORDER BY idle_value DESC
LIMIT ${top_k}
