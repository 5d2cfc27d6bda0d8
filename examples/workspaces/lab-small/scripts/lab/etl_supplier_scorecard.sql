DROP TABLE IF EXISTS lab_supplier_scorecard;
CREATE TABLE lab_supplier_scorecard (
  s_suppkey BIGINT,
  metric STRING,
  metric_value DOUBLE
) USING parquet LOCATION '${scratch}/supplier_scorecard';
INSERT OVERWRITE TABLE lab_supplier_scorecard
SELECT l_suppkey, 'revenue', CAST(sum(l_extendedprice * (1 - l_discount)) AS DOUBLE)
FROM lineitem
WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
  AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
GROUP BY l_suppkey
UNION ALL
SELECT l_suppkey, 'late_share', avg(CASE WHEN l_receiptdate > l_commitdate THEN 1.0 ELSE 0.0 END)
FROM lineitem
WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
  AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
GROUP BY l_suppkey
UNION ALL
SELECT l_suppkey, 'return_share', avg(CASE WHEN l_returnflag = 'R' THEN 1.0 ELSE 0.0 END)
FROM lineitem
WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
  AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
GROUP BY l_suppkey
UNION ALL
SELECT ps_suppkey, 'stock_value', CAST(sum(ps_availqty * ps_supplycost) AS DOUBLE)
FROM partsupp
WHERE ps_availqty >= ${min_availqty}
GROUP BY ps_suppkey;
SELECT
  sc.metric,
  n.n_name,
  count(*) AS suppliers,
  avg(sc.metric_value) AS avg_value,
  max(sc.metric_value) AS max_value
FROM lab_supplier_scorecard sc
JOIN supplier s ON s.s_suppkey = sc.s_suppkey
JOIN nation n ON n.n_nationkey = s.s_nationkey
GROUP BY sc.metric, n.n_name
ORDER BY sc.metric, n.n_name
