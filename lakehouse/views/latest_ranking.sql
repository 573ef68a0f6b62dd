-- Each cluster's newest finalized window: brokers ranked by traffic, beside their rank by partition count.
CREATE OR REPLACE TEMP VIEW latest_ranking AS
SELECT r.*
FROM broker_ranking r
JOIN (SELECT cluster, max(window_end) AS window_end FROM broker_ranking GROUP BY cluster) newest
  USING (cluster, window_end)
ORDER BY cluster, rank_by_traffic
