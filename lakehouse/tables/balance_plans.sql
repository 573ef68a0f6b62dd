-- One row per cluster and finalized window: the plan made (or why none was made).
-- status: proposed (actions to carry out), balanced (no action; every goal within its threshold),
-- unbalanced (no action; some goal outside its threshold), skipped (the data contract failed the
-- window), waiting (another plan holds the cluster). On proposed and unbalanced rows the unmet_* and
-- binding_* columns name the first goal, in the planner's priority order, still outside its threshold
-- once the plan is carried out, and what binds it (balancer/execution/verdict.py); unmet_goals lists
-- every such goal; advice is the method advice (balancer/execution/advice.py) for the window.
CREATE TABLE IF NOT EXISTS balance_plans (
  plan_id STRING NOT NULL,
  cluster STRING NOT NULL,
  created_at TIMESTAMP,
  window_start TIMESTAMP,
  window_end TIMESTAMP,
  status STRING NOT NULL,
  reason STRING,
  imbalance_before DOUBLE,
  imbalance_after DOUBLE,
  network_in_before DOUBLE,
  network_in_after DOUBLE,
  network_out_before DOUBLE,
  network_out_after DOUBLE,
  disk_before DOUBLE,
  disk_after DOUBLE,
  bytes_to_move BIGINT,
  leader_moves INT,
  replica_moves INT,
  reassignment_json STRING,
  election_json STRING,
  unmet_goal STRING,
  unmet_figure DOUBLE,
  unmet_threshold DOUBLE,
  unmet_lower_bound DOUBLE,
  unmet_goals ARRAY<STRING>,
  binding STRING,
  binding_topic STRING,
  binding_partition INT,
  binding_brokers ARRAY<INT>,
  advice STRING,
  advice_topic STRING,
  partitions_to_add INT,
  brokers_to_add INT,
  advice_detail STRING
) USING DELTA
