WITH lines AS (
  SELECT l_orderkey, l_partkey
  FROM lineitem
  WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
    AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
    AND l_quantity >= ${min_qty}
)
SELECT a.l_partkey AS part_a, b.l_partkey AS part_b, count(*) AS together
FROM lines a
JOIN lines b ON a.l_orderkey = b.l_orderkey AND a.l_partkey < b.l_partkey
GROUP BY a.l_partkey, b.l_partkey
ORDER BY together DESC, part_a, part_b
LIMIT ${top_k}
