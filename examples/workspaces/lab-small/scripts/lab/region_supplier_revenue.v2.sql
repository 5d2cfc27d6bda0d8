SELECT
  n.n_name,
  s.s_name,
  sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
  sum(l.l_extendedprice * (1 - l.l_discount) - ps.ps_supplycost * l.l_quantity) AS profit,
  count(DISTINCT l.l_orderkey) AS order_count
FROM lineitem l
JOIN partsupp ps ON ps.ps_partkey = l.l_partkey AND ps.ps_suppkey = l.l_suppkey
JOIN supplier s ON s.s_suppkey = l.l_suppkey
JOIN nation n ON n.n_nationkey = s.s_nationkey
JOIN region r ON r.r_regionkey = n.n_regionkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND r.r_name = '${region}'
GROUP BY n.n_name, s.s_name
ORDER BY profit DESC
LIMIT ${top_k}
