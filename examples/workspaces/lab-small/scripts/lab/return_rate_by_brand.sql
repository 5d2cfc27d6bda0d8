SELECT
  p.p_brand,
  l.l_shipinstruct,
  count(*) AS line_count,
  avg(CASE WHEN l.l_returnflag = 'R' THEN 1.0 ELSE 0.0 END) AS return_rate,
  sum(CASE WHEN l.l_returnflag = 'R' THEN l.l_extendedprice ELSE 0 END) AS returned_value
FROM lineitem l
JOIN part p ON p.p_partkey = l.l_partkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND l.l_shipinstruct IN (${instructions})
GROUP BY p.p_brand, l.l_shipinstruct
HAVING count(*) >= ${min_lines}
ORDER BY return_rate DESC
