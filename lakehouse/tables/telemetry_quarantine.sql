-- Every record that failed parsing or validation, with the reason and its Kafka coordinates.
CREATE TABLE IF NOT EXISTS telemetry_quarantine (
  kafka_topic STRING NOT NULL,
  kafka_partition INT NOT NULL,
  kafka_offset BIGINT NOT NULL,
  kafka_timestamp TIMESTAMP,
  key BINARY,
  value STRING,
  reason STRING NOT NULL,
  batch_id BIGINT,
  quarantined_at TIMESTAMP
) USING DELTA
