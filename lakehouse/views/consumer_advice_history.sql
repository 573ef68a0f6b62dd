-- Advice for flagged consumer groups, newest first: the cause, whom it concerns, the figure behind it and
-- what to do (recorded, never executed), beside the group's skew, lag and churn in that window.
CREATE OR REPLACE TEMP VIEW consumer_advice_history AS
SELECT a.cluster, a.window_end, a.group_id, a.kind, a.client_id, a.member_id, a.topic, a.partition,
       round(a.figure, 2) AS figure, a.detail, a.recommendation, round(g.traffic_skew, 2) AS traffic_skew,
       g.lag_records, g.membership_changes, g.assignor, g.group_protocol
FROM consumer_advice a
LEFT JOIN consumer_groups g USING (cluster, group_id, window_end)
ORDER BY a.window_end DESC, a.cluster, a.group_id, a.kind
