WITH spend AS (
  SELECT o_custkey, sum(o_totalprice) AS total_spend, count(*) AS order_count
  FROM orders
  WHERE o_ordermonth >= trunc(DATE '${start}', 'MM') AND o_ordermonth < DATE '${end}'
    AND o_orderdate >= DATE '${start}' AND o_orderdate < DATE '${end}'
    AND o_orderstatus IN (${statuses})
  GROUP BY o_custkey
),
ranked AS (
  SELECT
    n.n_name,
    c.c_mktsegment,
    c.c_name,
    sp.total_spend,
    sp.order_count,
    dense_rank() OVER (PARTITION BY n.n_name ORDER BY sp.total_spend DESC) AS spend_rank,
    percent_rank() OVER (PARTITION BY c.c_mktsegment ORDER BY sp.order_count) AS frequency_pct,
    sp.total_spend / sum(sp.total_spend) OVER (PARTITION BY n.n_name) AS share_of_nation
  FROM spend sp
  JOIN customer c ON c.c_custkey = sp.o_custkey
  JOIN nation n ON n.n_nationkey = c.c_nationkey
)
SELECT * FROM ranked
WHERE spend_rank <= ${top_k} OR frequency_pct >= 0.99
ORDER BY n_name, spend_rank
