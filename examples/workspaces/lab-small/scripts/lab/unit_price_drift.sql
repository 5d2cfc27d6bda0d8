WITH monthly AS (
  SELECT l_partkey, l_shipmonth AS ship_month, sum(l_extendedprice) / sum(l_quantity) AS unit_price
  FROM lineitem
  WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
    AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
  GROUP BY l_partkey, l_shipmonth
),
drift AS (
  SELECT
    l_partkey,
    ship_month,
    unit_price,
    unit_price - lag(unit_price) OVER (PARTITION BY l_partkey ORDER BY ship_month) AS change
  FROM monthly
)
SELECT d.l_partkey, p.p_name, d.ship_month, d.unit_price, d.change
FROM drift d
JOIN part p ON p.p_partkey = d.l_partkey
WHERE d.change IS NOT NULL
ORDER BY abs(d.change) DESC, d.l_partkey, d.ship_month
LIMIT ${top_k}
