DROP TABLE IF EXISTS lab_customer_snapshot;
CREATE TABLE lab_customer_snapshot (
  c_custkey BIGINT,
  c_name STRING,
  c_mktsegment STRING,
  last_order_date DATE,
  last_order_total DOUBLE,
  orders_in_window BIGINT,
  balance_rank INT
) USING parquet LOCATION '${scratch}/customer_snapshot';
INSERT OVERWRITE TABLE lab_customer_snapshot
SELECT c_custkey, c_name, c_mktsegment, o_orderdate, CAST(o_totalprice AS DOUBLE), orders_in_window, balance_rank
FROM (
  SELECT
    c.c_custkey,
    c.c_name,
    c.c_mktsegment,
    o.o_orderdate,
    o.o_totalprice,
    row_number() OVER (PARTITION BY c.c_custkey ORDER BY o.o_orderdate DESC, o.o_orderkey DESC) AS recency,
    count(*) OVER (PARTITION BY c.c_custkey) AS orders_in_window,
    dense_rank() OVER (PARTITION BY c.c_mktsegment ORDER BY c.c_acctbal DESC) AS balance_rank
  FROM orders o
  JOIN customer c ON c.c_custkey = o.o_custkey
  WHERE o.o_ordermonth >= trunc(DATE '${start}', 'MM') AND o.o_ordermonth < DATE '${end}'
    AND o.o_orderdate >= DATE '${start}' AND o.o_orderdate < DATE '${end}'
    AND c.c_mktsegment IN (${segments})
) latest
WHERE recency = 1;
SELECT c_mktsegment, count(*) AS customers, avg(orders_in_window) AS avg_orders, max(last_order_date) AS newest
FROM lab_customer_snapshot
GROUP BY c_mktsegment
ORDER BY c_mktsegment
