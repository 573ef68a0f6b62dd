"""Plan: each closed (cluster, window) handed to the pure planner (``balancer.planner``) in one Python task,
and its result as ``balance_plans`` and ``plan_actions`` rows. Rule: the planning itself is the planner's;
here is only the Spark side of it (grouping, task slots, rows)."""
