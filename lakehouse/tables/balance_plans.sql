-- One row per cluster and finalized window: the plan made (or why none was made).
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
  election_json STRING
) USING DELTA
