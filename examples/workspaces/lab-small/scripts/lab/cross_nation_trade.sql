SELECT
  sn.n_name AS supplier_nation,
  cn.n_name AS customer_nation,
  count(*) AS line_count,
  sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue
FROM lineitem l
JOIN orders o ON o.o_orderkey = l.l_orderkey
JOIN customer c ON c.c_custkey = o.o_custkey
JOIN supplier s ON s.s_suppkey = l.l_suppkey
JOIN nation sn ON sn.n_nationkey = s.s_nationkey
JOIN nation cn ON cn.n_nationkey = c.c_nationkey
JOIN region r ON r.r_regionkey = cn.n_regionkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND o.o_ordermonth >= trunc(date_sub(DATE '${start}', 122), 'MM') AND o.o_ordermonth < DATE '${end}'
  AND o.o_orderdate >= date_sub(DATE '${start}', 122) AND o.o_orderdate < DATE '${end}'
  AND r.r_name = '${region}'
  AND sn.n_nationkey <> cn.n_nationkey
GROUP BY sn.n_name, cn.n_name
ORDER BY revenue DESC
LIMIT ${top_k}
