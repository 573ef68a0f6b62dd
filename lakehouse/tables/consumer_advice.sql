-- Advice per flagged consumer group and window, naming the cause (kind), the member or partition it
-- concerns, the figure behind it and what to do. Recorded for operators, never executed by the job.
CREATE TABLE IF NOT EXISTS consumer_advice (
  cluster STRING NOT NULL,
  window_start TIMESTAMP NOT NULL,
  window_end TIMESTAMP NOT NULL,
  group_id STRING NOT NULL,
  kind STRING NOT NULL,
  member_id STRING,
  client_id STRING,
  host STRING,
  topic STRING,
  partition INT,
  figure DOUBLE,
  detail STRING,
  recommendation STRING
) USING DELTA
