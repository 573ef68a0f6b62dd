-- Every read of the monitored cluster's consumer groups (consumers.interval): one row per group and
-- assigned partition with its committed and end offsets; a member with nothing assigned has one row with
-- no topic; a committed partition no member holds, one row with no member. lag = end - committed offset.
CREATE TABLE IF NOT EXISTS consumer_assignments (
  cluster STRING NOT NULL,
  observed_at TIMESTAMP NOT NULL,
  group_id STRING NOT NULL,
  group_protocol STRING,
  assignor STRING,
  group_state STRING,
  members INT,
  member_id STRING,
  client_id STRING,
  host STRING,
  group_instance_id STRING,
  topic STRING,
  partition INT,
  committed_offset BIGINT,
  end_offset BIGINT,
  lag BIGINT
) USING DELTA
