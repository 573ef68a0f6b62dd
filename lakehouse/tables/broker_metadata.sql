-- Every observed change of a monitored cluster's brokers: a broker that appeared, left
-- (present false) or changed rack when the metadata was read.
CREATE TABLE IF NOT EXISTS broker_metadata (
  cluster STRING NOT NULL,
  observed_at TIMESTAMP NOT NULL,
  broker INT NOT NULL,
  rack STRING,
  present BOOLEAN NOT NULL
) USING DELTA
