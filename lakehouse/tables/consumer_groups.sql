-- Per finalized window and consumer group: protocol, assignor, state, members, traffic and its skew
-- (busiest member / fair share), lag and its growth, membership changes and rejoins under new ids;
-- flagged: skew over consumers.balance_threshold or a cause in consumer_advice (advice: its kinds).
CREATE TABLE IF NOT EXISTS consumer_groups (
  cluster STRING NOT NULL,
  window_start TIMESTAMP NOT NULL,
  window_end TIMESTAMP NOT NULL,
  group_id STRING NOT NULL,
  group_protocol STRING,
  assignor STRING,
  group_state STRING,
  reads INT,
  members INT,
  idle_members INT,
  static_members INT,
  partitions INT,
  known_partitions INT,
  topics INT,
  bytes_per_sec DOUBLE,
  fair_share DOUBLE,
  traffic_skew DOUBLE,
  partition_skew DOUBLE,
  lag_records BIGINT,
  lag_bytes DOUBLE,
  lag_growth BIGINT,
  membership_changes INT,
  rejoins INT,
  rejoined_client STRING,
  is_skewed BOOLEAN,
  flagged BOOLEAN,
  advice ARRAY<STRING>
) USING DELTA
