-- Every record that failed parsing or validation, with the reason and its Kafka coordinates.
-- key and value: the record's bytes as they arrived. value_text: the value as text for reading,
-- invalid UTF-8 replaced by U+FFFD, cut at source.max_value_bytes.
CREATE TABLE IF NOT EXISTS telemetry_quarantine (
  kafka_topic STRING NOT NULL,
  kafka_partition INT NOT NULL,
  kafka_offset BIGINT NOT NULL,
  kafka_timestamp TIMESTAMP,
  key BINARY,
  value BINARY,
  value_text STRING,
  reason STRING NOT NULL,
  batch_id BIGINT,
  quarantined_at TIMESTAMP
) USING DELTA
