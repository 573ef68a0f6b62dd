-- Each consumer group's newest finalized window: members ranked by the bytes/s they must consume, beside
-- their rank by lag and by partition count, with the group's skew and whether it was flagged.
CREATE OR REPLACE TEMP VIEW latest_consumer_ranking AS
SELECT r.cluster, r.group_id, r.window_end, r.rank_by_traffic, r.rank_by_lag, r.rank_by_partitions,
       r.client_id, r.host, r.member_id, r.partitions, round(r.bytes_per_sec) AS bytes_per_sec,
       round(r.traffic_share, 2) AS traffic_share, r.lag_records, round(r.lag_bytes) AS lag_bytes, r.is_hot,
       round(g.traffic_skew, 2) AS group_traffic_skew, g.flagged AS group_flagged, g.advice AS group_advice
FROM consumer_ranking r
JOIN (SELECT cluster, group_id, max(window_end) AS window_end FROM consumer_ranking GROUP BY cluster, group_id) newest
  USING (cluster, group_id, window_end)
JOIN consumer_groups g USING (cluster, group_id, window_end)
ORDER BY r.cluster, r.group_id, r.rank_by_traffic
