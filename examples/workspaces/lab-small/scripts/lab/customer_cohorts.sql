WITH firsts AS (
  SELECT
    o_custkey,
    o_orderdate,
    o_totalprice,
    min(o_orderdate) OVER (PARTITION BY o_custkey) AS first_date
  FROM orders
  WHERE o_ordermonth >= trunc(DATE '${start}', 'MM') AND o_ordermonth < DATE '${end}'
    AND o_orderdate >= DATE '${start}' AND o_orderdate < DATE '${end}'
    AND o_orderpriority IN (${priorities})
)
SELECT
  trunc(first_date, 'MM') AS cohort,
  CAST(months_between(trunc(o_orderdate, 'MM'), trunc(first_date, 'MM')) AS INT) AS months_since,
  count(DISTINCT o_custkey) AS active_customers,
  sum(o_totalprice) AS spend
FROM firsts
GROUP BY 1, 2
ORDER BY 1, 2
