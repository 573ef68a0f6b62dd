-- What `balancer execute` did, batch by batch (balancer.execution.executor): one row per step of a
-- batch, appended only. `started` is written BEFORE the batch's throttles are set and names them
-- (throttle {broker: bytes/s} and throttled_replicas {topic: {leader: [...], follower: [...]}}: only
-- what this batch set itself, never a rate or an entry that was there before it; throttled_topics
-- names those topics), so a run that dies leaves a record of every throttle it may have left behind;
-- the next start removes exactly those first. A batch is done once it has a
-- `completed` row; `stalled`, `stopped`, `interrupted` and `failed` end a run's attempt at it (its
-- reassignments cancelled or left to the next run, its throttles removed). Rows with batch -1 are
-- plan-level: `stop_requested` (balancer execute --stop), `running` / `released` (the run that holds
-- the plan: balancer.execution.lease). measured_seconds / estimated_seconds is
-- duration_ratio: how the plan's computed estimate held on the real cluster.
CREATE TABLE IF NOT EXISTS plan_executions (
  plan_id STRING NOT NULL,
  cluster STRING NOT NULL,
  run_id STRING NOT NULL,
  batch INT NOT NULL,
  kind STRING,
  outcome STRING NOT NULL,
  recorded_at TIMESTAMP NOT NULL,
  started_at TIMESTAMP,
  ended_at TIMESTAMP,
  actions INT,
  bytes_to_move BIGINT,
  throttle STRING,
  throttled_topics ARRAY<STRING>,
  estimated_seconds DOUBLE,
  measured_seconds DOUBLE,
  duration_ratio DOUBLE,
  detail STRING,
  throttled_replicas STRING
) USING DELTA
