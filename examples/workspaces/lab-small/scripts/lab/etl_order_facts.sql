DROP TABLE IF EXISTS lab_order_facts;
CREATE TABLE lab_order_facts (
  o_orderkey BIGINT,
  o_custkey BIGINT,
  c_mktsegment STRING,
  customer_nation STRING,
  line_count BIGINT,
  gross_revenue DOUBLE,
  net_revenue DOUBLE,
  order_date DATE
) USING parquet PARTITIONED BY (order_date) LOCATION '${scratch}/order_facts';
INSERT OVERWRITE TABLE lab_order_facts
SELECT
  o.o_orderkey,
  o.o_custkey,
  c.c_mktsegment,
  n.n_name,
  count(*),
  CAST(sum(l.l_extendedprice) AS DOUBLE),
  CAST(sum(l.l_extendedprice * (1 - l.l_discount)) AS DOUBLE),
  o.o_orderdate
FROM orders o
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
JOIN customer c ON c.c_custkey = o.o_custkey
JOIN nation n ON n.n_nationkey = c.c_nationkey
WHERE o.o_ordermonth >= trunc(DATE '${start}', 'MM') AND o.o_ordermonth < DATE '${end}'
  AND o.o_orderdate >= DATE '${start}' AND o.o_orderdate < DATE '${end}'
  AND l.l_shipmonth >= trunc(DATE '${start}', 'MM') AND l.l_shipmonth < date_add(DATE '${end}', 122)
  AND l.l_shipdate >= DATE '${start}' AND l.l_shipdate < date_add(DATE '${end}', 122)
GROUP BY o.o_orderkey, o.o_custkey, c.c_mktsegment, n.n_name, o.o_orderdate;
SELECT order_date, count(*) AS order_count, sum(net_revenue) AS net_revenue
FROM lab_order_facts
GROUP BY order_date
ORDER BY order_date
