SELECT word, count(*) AS occurrences, count(DISTINCT l_orderkey) AS order_count
FROM (
  SELECT l_orderkey, explode(split(lower(l_comment), ' ')) AS word
  FROM lineitem
  WHERE l_shipmonth >= trunc(DATE '${start}', 'MM') AND l_shipmonth < DATE '${end}'
    AND l_shipdate >= DATE '${start}' AND l_shipdate < DATE '${end}'
    AND l_comment LIKE '%${keyword}%'
) words
WHERE length(word) >= ${min_length}
GROUP BY word
ORDER BY occurrences DESC, word
LIMIT ${top_k}
