"""Windows: the event-time windows a micro-batch's watermark closed, aggregated from the landed on-time
telemetry into per-replica, per-partition and per-broker loads and the hot-broker ranking. Rule: both
telemetry formats become the same report rows here, so every later stage is format-blind."""
