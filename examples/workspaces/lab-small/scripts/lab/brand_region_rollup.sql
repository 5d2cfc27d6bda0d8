SELECT
  r.r_name,
  p.p_mfgr,
  p.p_brand,
  grouping_id() AS rollup_level,
  sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
  count(DISTINCT l.l_orderkey) AS order_count
FROM lineitem l
JOIN part p ON p.p_partkey = l.l_partkey
JOIN supplier s ON s.s_suppkey = l.l_suppkey
JOIN nation n ON n.n_nationkey = s.s_nationkey
JOIN region r ON r.r_regionkey = n.n_regionkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND p.p_size <= ${max_size}
GROUP BY ROLLUP(r.r_name, p.p_mfgr, p.p_brand)
ORDER BY rollup_level, revenue DESC
