"""Track: open plans followed through the telemetry (``balancer.execution.lifecycle`` decides, purely) to
``plan_events``, ``plan_batches`` and ``plan_outcomes``. Rule: one plan at a time per cluster; the windows an
open plan holds wait."""
