WITH supplier_revenue AS (
  SELECT l_suppkey, sum(l_extendedprice * (1 - l_discount)) AS revenue
  FROM lineitem
  WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
    AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
  GROUP BY l_suppkey
)
SELECT
  n.n_name,
  s.s_name,
  sr.revenue,
  sr.revenue / sum(sr.revenue) OVER (PARTITION BY n.n_name) AS nation_share,
  ntile(4) OVER (PARTITION BY n.n_name ORDER BY sr.revenue) AS quartile
FROM supplier_revenue sr
JOIN supplier s ON s.s_suppkey = sr.l_suppkey
JOIN nation n ON n.n_nationkey = s.s_nationkey
WHERE s.s_acctbal >= ${min_acctbal}
ORDER BY n.n_name, sr.revenue DESC
