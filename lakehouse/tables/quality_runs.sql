-- One row per data-contract check: per cluster and ingest micro-batch (query 'ingest'; window_start/end
-- = the event-time span of the cluster's records in the batch), or per cluster and finalized window
-- (query 'balance'). failed_expectations is readable; details_json holds the observed values.
CREATE TABLE IF NOT EXISTS quality_runs (
  run_id STRING NOT NULL,
  query STRING NOT NULL,
  batch_id BIGINT NOT NULL,
  cluster STRING,
  window_start TIMESTAMP,
  window_end TIMESTAMP,
  suite STRING NOT NULL,
  success BOOLEAN NOT NULL,
  evaluated INT,
  failed_expectations STRING,
  details_json STRING,
  validation_ms BIGINT,
  checked_at TIMESTAMP
) USING DELTA
