-- Each proposed plan as executable batches (balancer.execution): leadership transfers first, then
-- replica moves within the executor's concurrency limits, each with its computed replication
-- throttle per broker (JSON {broker: bytes/s}) and estimated duration toward executor.deadline.
CREATE TABLE IF NOT EXISTS plan_batches (
  plan_id STRING NOT NULL,
  cluster STRING NOT NULL,
  batch INT NOT NULL,
  kind STRING NOT NULL,
  actions INT,
  bytes_to_move BIGINT,
  throttle STRING,
  estimated_seconds DOUBLE,
  meets_deadline BOOLEAN,
  note STRING,
  reassignment_json STRING,
  election_json STRING
) USING DELTA
