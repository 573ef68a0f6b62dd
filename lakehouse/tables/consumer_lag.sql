-- Per finalized window, group, member and partition (at the window's last read): lag in records and
-- estimated bytes (records x the partition's mean record size), its growth over the window, the rate the
-- group consumed and the partition received, and the bytes/s its consumer must consume (partition_load).
CREATE TABLE IF NOT EXISTS consumer_lag (
  cluster STRING NOT NULL,
  window_start TIMESTAMP NOT NULL,
  window_end TIMESTAMP NOT NULL,
  group_id STRING NOT NULL,
  member_id STRING,
  client_id STRING,
  topic STRING NOT NULL,
  partition INT NOT NULL,
  committed_offset BIGINT,
  end_offset BIGINT,
  lag_records BIGINT,
  lag_bytes DOUBLE,
  lag_growth BIGINT,
  consumed_records_per_sec DOUBLE,
  consumed_bytes_per_sec DOUBLE,
  produced_records_per_sec DOUBLE,
  bytes_per_sec DOUBLE
) USING DELTA
