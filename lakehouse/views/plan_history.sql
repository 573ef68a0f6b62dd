-- Every plan with what it would change, newest first.
CREATE OR REPLACE TEMP VIEW plan_history AS
SELECT cluster, window_end, status, round(imbalance_before, 3) AS imbalance_before,
       round(imbalance_after, 3) AS imbalance_after, leader_moves, replica_moves,
       round(bytes_to_move / 1e9, 2) AS gb_to_move, reason, plan_id
FROM balance_plans
ORDER BY window_end DESC, cluster
