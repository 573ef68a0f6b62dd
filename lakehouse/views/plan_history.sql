-- Every plan with what it would change, newest first; where a goal stays outside its threshold
-- (after the plan, or with no plan at all: status unbalanced), the worst such goal, what binds it,
-- and the method advice.
CREATE OR REPLACE TEMP VIEW plan_history AS
SELECT cluster, window_end, status, round(imbalance_before, 3) AS imbalance_before,
       round(imbalance_after, 3) AS imbalance_after, leader_moves, replica_moves,
       round(bytes_to_move / 1e9, 2) AS gb_to_move, unmet_goal, round(unmet_figure, 3) AS unmet_figure,
       unmet_threshold, round(unmet_lower_bound, 3) AS unmet_lower_bound, binding, advice, reason, plan_id
FROM balance_plans
ORDER BY window_end DESC, cluster
