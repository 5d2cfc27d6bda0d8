SELECT
  p.p_type,
  count(DISTINCT o.o_custkey) AS buyers,
  count(DISTINCT l.l_suppkey) AS suppliers,
  count(*) AS line_count
FROM lineitem l
JOIN orders o ON o.o_orderkey = l.l_orderkey
JOIN part p ON p.p_partkey = l.l_partkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND o.o_ordermonth >= trunc(date_sub(DATE '${start}', 122), 'MM') AND o.o_ordermonth < DATE '${end}'
  AND o.o_orderdate >= date_sub(DATE '${start}', 122) AND o.o_orderdate < DATE '${end}'
  AND p.p_container LIKE '${container_size} %'
GROUP BY p.p_type
ORDER BY buyers DESC
