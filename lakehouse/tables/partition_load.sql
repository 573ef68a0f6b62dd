-- Per finalized window and partition: rates from the leader's records, topology from the latest record.
CREATE TABLE IF NOT EXISTS partition_load (
  cluster STRING NOT NULL,
  window_start TIMESTAMP NOT NULL,
  window_end TIMESTAMP NOT NULL,
  topic STRING NOT NULL,
  partition INT NOT NULL,
  leader INT,
  replicas ARRAY<INT>,
  replication_factor INT,
  bytes_in DOUBLE,
  bytes_out DOUBLE,
  messages_in DOUBLE,
  size DOUBLE,
  samples BIGINT,
  reporting_replicas INT
) USING DELTA
