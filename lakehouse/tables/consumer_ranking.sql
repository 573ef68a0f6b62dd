-- Per finalized window: each group's members ranked by the bytes/s they must consume (partition byte
-- rates x assignment), beside their rank by lag and by partition count; is_hot: over the group's fair
-- share x consumers.balance_threshold.
CREATE TABLE IF NOT EXISTS consumer_ranking (
  cluster STRING NOT NULL,
  window_start TIMESTAMP NOT NULL,
  window_end TIMESTAMP NOT NULL,
  group_id STRING NOT NULL,
  member_id STRING NOT NULL,
  client_id STRING,
  host STRING,
  group_instance_id STRING,
  partitions INT,
  topics INT,
  unrated_partitions INT,
  bytes_per_sec DOUBLE,
  traffic_share DOUBLE,
  lag_records BIGINT,
  lag_bytes DOUBLE,
  lag_growth BIGINT,
  consumed_bytes_per_sec DOUBLE,
  rank_by_traffic INT,
  rank_by_lag INT,
  rank_by_partitions INT,
  is_hot BOOLEAN
) USING DELTA
