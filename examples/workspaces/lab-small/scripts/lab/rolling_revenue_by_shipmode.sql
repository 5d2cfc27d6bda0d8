WITH daily AS (
  SELECT l_shipdate AS ship_day, l_shipmode, sum(l_extendedprice * (1 - l_discount)) AS revenue
  FROM lineitem
  WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
    AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
  GROUP BY l_shipdate, l_shipmode
)
SELECT
  ship_day,
  l_shipmode,
  revenue,
  sum(revenue) OVER (
    PARTITION BY l_shipmode ORDER BY ship_day ROWS BETWEEN ${window_rows} PRECEDING AND CURRENT ROW
  ) AS rolling_revenue,
  revenue - lag(revenue) OVER (PARTITION BY l_shipmode ORDER BY ship_day) AS day_over_day
FROM daily
ORDER BY l_shipmode, ship_day
