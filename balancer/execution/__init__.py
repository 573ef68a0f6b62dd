"""Executing a plan: batches within concurrency limits, computed replication throttles, method
advice, and the files Kafka's own tools take.

    from balancer.execution import split_batches, plan_schedule, batch_rows, export_plan, advise
    batches = split_batches(plan.actions)                  # leadership first, then replica moves
    schedule = plan_schedule(batches, deadline_seconds=3600, broker_load=..., capacity_threshold=0.8,
                             partition_traffic=...)        # per batch and broker: bytes/s
    rows = batch_rows(batches, schedule.throttles, plan_id=..., cluster=...)   # plan_batches rows
    export_plan(rows, "out/")                              # Kafka's JSON files, run.sh, README.txt
    advise(snapshot, plan, options)                        # add partitions / brokers, move, or nothing

Pure Python: no Spark; only ``export.export_plan`` writes files.
"""

from __future__ import annotations

from .advice import Advice, advise
from .batches import Batch, participants, split_batches
from .export import ExportError, batch_election, batch_reassignment, batch_rows, export_plan
from .throttle import BatchThrottle, BrokerLoad, Schedule, compute_throttle, plan_schedule

__all__ = [
    "Advice",
    "Batch",
    "BatchThrottle",
    "BrokerLoad",
    "ExportError",
    "Schedule",
    "advise",
    "batch_election",
    "batch_reassignment",
    "batch_rows",
    "compute_throttle",
    "export_plan",
    "participants",
    "plan_schedule",
    "split_batches",
]
