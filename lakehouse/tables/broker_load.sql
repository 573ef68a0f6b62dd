-- Per finalized window and broker: Cruise Control's load model over partition_load, plus capacity.
CREATE TABLE IF NOT EXISTS broker_load (
  cluster STRING NOT NULL,
  window_start TIMESTAMP NOT NULL,
  window_end TIMESTAMP NOT NULL,
  broker INT NOT NULL,
  rack STRING,
  network_in DOUBLE,
  network_out DOUBLE,
  disk DOUBLE,
  replicas INT,
  leaders INT,
  capacity_network_in DOUBLE,
  capacity_network_out DOUBLE,
  capacity_disk DOUBLE,
  util_network_in DOUBLE,
  util_network_out DOUBLE,
  util_disk DOUBLE,
  cpu DOUBLE,
  samples BIGINT
) USING DELTA
