SELECT
  s.s_name,
  n.n_name,
  count(*) AS late_lines,
  avg(datediff(l.l_receiptdate, l.l_commitdate)) AS avg_days_late
FROM lineitem l
JOIN supplier s ON s.s_suppkey = l.l_suppkey
JOIN nation n ON n.n_nationkey = s.s_nationkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND datediff(l.l_receiptdate, l.l_commitdate) >= ${min_days_late}
  AND n.n_name IN (${nations})
GROUP BY s.s_name, n.n_name
ORDER BY late_lines DESC, s.s_name
LIMIT ${top_k}
