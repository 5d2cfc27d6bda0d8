SELECT
  p.p_brand,
  p.p_mfgr,
  count(DISTINCT l.l_orderkey) AS order_count,
  sum(l.l_quantity) AS units
FROM lineitem_skew l
JOIN part p ON p.p_partkey = l.l_partkey
WHERE l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < DATE '${end}'
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < DATE '${end}'
  AND p.p_size <= ${max_size}
GROUP BY p.p_brand, p.p_mfgr
ORDER BY order_count DESC
