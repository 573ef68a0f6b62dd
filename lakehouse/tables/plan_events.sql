-- A plan's status changes and progress, as observed in the telemetry of each finalized window
-- (balancer.execution.lifecycle). Appended only when the status or the progress changes; the
-- plan's own balance_plans row is never rewritten. The view plan_status gives the latest.
CREATE TABLE IF NOT EXISTS plan_events (
  plan_id STRING NOT NULL,
  cluster STRING NOT NULL,
  window_end TIMESTAMP NOT NULL,
  status STRING NOT NULL,
  actions_done INT,
  actions_total INT,
  bytes_done BIGINT,
  detail STRING,
  recorded_at TIMESTAMP
) USING DELTA
