-- Each plan's current status: its latest plan_events row, else its balance_plans status (proposed).
CREATE OR REPLACE TEMP VIEW plan_status AS
SELECT p.cluster, p.window_end AS proposed_for, coalesce(e.status, p.status) AS status,
       e.window_end AS as_of, coalesce(e.actions_done, 0) AS actions_done, a.actions AS actions_total,
       coalesce(e.bytes_done, 0) AS bytes_done, p.bytes_to_move, e.detail, p.plan_id
FROM balance_plans p
LEFT JOIN (
  SELECT * FROM (
    SELECT *, row_number() OVER (PARTITION BY plan_id ORDER BY window_end DESC, recorded_at DESC) AS newest
    FROM plan_events) WHERE newest = 1
) e USING (plan_id)
LEFT JOIN (SELECT plan_id, count(*) AS actions FROM plan_actions GROUP BY plan_id) a USING (plan_id)
WHERE p.status = 'proposed'
ORDER BY p.window_end DESC, p.cluster
