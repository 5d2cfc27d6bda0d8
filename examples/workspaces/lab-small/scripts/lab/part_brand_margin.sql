SELECT
  p.p_brand,
  p.p_type,
  sum(l.l_extendedprice * (1 - l.l_discount) - ps.ps_supplycost * l.l_quantity) AS margin,
  count(*) AS line_count
FROM lineitem l
JOIN partsupp ps ON ps.ps_partkey = l.l_partkey AND ps.ps_suppkey = l.l_suppkey
JOIN part p ON p.p_partkey = l.l_partkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND p.p_size BETWEEN ${min_size} AND ${min_size} + ${size_span}
  AND p.p_type LIKE '%${material}'
GROUP BY p.p_brand, p.p_type
ORDER BY margin DESC
