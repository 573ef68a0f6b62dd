-- Hot brokers ranked by traffic (network_in + network_out), beside the rank a partition count would give.
CREATE TABLE IF NOT EXISTS broker_ranking (
  cluster STRING NOT NULL,
  window_start TIMESTAMP NOT NULL,
  window_end TIMESTAMP NOT NULL,
  broker INT NOT NULL,
  network_in DOUBLE,
  network_out DOUBLE,
  traffic DOUBLE,
  replicas INT,
  leaders INT,
  utilization DOUBLE,
  rank_by_traffic INT,
  rank_by_partitions INT,
  is_hot BOOLEAN
) USING DELTA
