-- The actions of each plan, in execution order (leadership transfers first: they move no data).
CREATE TABLE IF NOT EXISTS plan_actions (
  plan_id STRING NOT NULL,
  cluster STRING NOT NULL,
  seq INT NOT NULL,
  action STRING NOT NULL,
  topic STRING NOT NULL,
  partition INT NOT NULL,
  old_replicas ARRAY<INT>,
  new_replicas ARRAY<INT>,
  old_leader INT,
  new_leader INT,
  bytes_to_move BIGINT
) USING DELTA
