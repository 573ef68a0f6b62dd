"""Executing a plan: batches within concurrency limits, computed replication throttles, method
advice, and the files Kafka's own tools take.

    from balancer.execution import split_batches, plan_schedule
    batches = split_batches(plan.actions)                  # leadership first, then replica moves
    schedule = plan_schedule(batches, deadline_seconds=3600, broker_load=..., capacity_threshold=0.8,
                             partition_traffic=...)        # per batch and broker: bytes/s

Pure Python: no Spark; only ``export.export_plan`` writes files.
"""

from __future__ import annotations

from .batches import Batch, participants, split_batches
from .throttle import BatchThrottle, BrokerLoad, Schedule, compute_throttle, plan_schedule

__all__ = ["Batch", "BatchThrottle", "BrokerLoad", "Schedule", "compute_throttle", "participants", "plan_schedule",
           "split_batches"]
