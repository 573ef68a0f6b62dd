-- Predicted vs realized, for each completed plan, in the first full window after it completed.
-- Figures are utilization relative to the cluster's (load / capacity over sum of load / sum of
-- capacity) per resource: per broker (broker set), and the balance figure, their maximum, for
-- the cluster (broker null). before: the plan's window; predicted: the plan's window with the
-- plan's targets applied; realized: the measured window. traffic_change: total network traffic
-- (in + out) of the realized window / that of the plan's window - 1, so a miss can be explained.
CREATE TABLE IF NOT EXISTS plan_outcomes (
  plan_id STRING NOT NULL,
  cluster STRING NOT NULL,
  window_end TIMESTAMP NOT NULL,
  resource STRING NOT NULL,
  broker INT,
  before DOUBLE,
  predicted DOUBLE,
  realized DOUBLE,
  traffic_change DOUBLE
) USING DELTA
