-- Every observed change of a monitored cluster's topology: one row per partition whose replicas,
-- leader or in-sync replicas changed (or that appeared) when the metadata was read; an empty
-- replica list means the partition was deleted. Answers "where was partition X at 03:10?".
CREATE TABLE IF NOT EXISTS cluster_metadata (
  cluster STRING NOT NULL,
  observed_at TIMESTAMP NOT NULL,
  topic STRING NOT NULL,
  partition INT NOT NULL,
  replicas ARRAY<INT>,
  leader INT,
  isr ARRAY<INT>
) USING DELTA
