"""``plan_executions`` rows as the executor writes and reads them: each row's outcome and its typed record.

Batch rows (``batch`` >= 0) say what a run did with one batch; plan-level rows (``batch`` -1) say what was
asked of the plan (``stop_requested``) and which run holds it (``running``, ``released``: see
``balancer.execution.lease``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    """``plan_executions.outcome``."""

    STARTED = "started"  # throttles recorded, about to be set
    COMPLETED = "completed"
    STALLED = "stalled"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"  # found open by the next start: its run died; throttles removed
    FAILED = "failed"
    STOP_REQUESTED = "stop_requested"  # plan-level (batch -1): balancer execute --stop
    RUNNING = "running"  # plan-level: a run holds the plan (claimed or renewed); detail names its process
    RELEASED = "released"  # plan-level: that run ended and no longer holds the plan


PLAN_LEVEL = -1  # plan_executions.batch of plan-level rows


@dataclass(frozen=True, kw_only=True)
class ExecutionRecord:
    """One ``plan_executions`` row."""

    plan_id: str
    cluster: str
    run_id: str
    batch: int
    outcome: Outcome
    recorded_at: datetime
    kind: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    actions: int | None = None
    bytes_to_move: int | None = None
    throttle: Mapping[int, int] | None = None
    throttled_topics: tuple[str, ...] = ()
    estimated_seconds: float | None = None
    measured_seconds: float | None = None
    duration_ratio: float | None = None
    detail: str | None = None
    # topic -> (leader entries, follower entries) "partition:broker" this batch added to its throttled-
    # replica lists (None on rows written before the column existed: then throttled_topics' keys are whole)
    throttled_replicas: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None

    def row(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "cluster": self.cluster,
            "run_id": self.run_id,
            "batch": self.batch,
            "kind": self.kind,
            "outcome": str(self.outcome),
            "recorded_at": self.recorded_at,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "actions": self.actions,
            "bytes_to_move": self.bytes_to_move,
            "throttle": json.dumps({str(b): int(r) for b, r in sorted(self.throttle.items())})
            if self.throttle
            else None,
            "throttled_topics": list(self.throttled_topics),
            "estimated_seconds": self.estimated_seconds,
            "measured_seconds": self.measured_seconds,
            "duration_ratio": self.duration_ratio,
            "detail": self.detail,
            "throttled_replicas": json.dumps(
                {
                    t: {"leader": list(lead), "follower": list(follow)}
                    for t, (lead, follow) in sorted(self.throttled_replicas.items())
                }
            )
            if self.throttled_replicas is not None
            else None,
        }

    @staticmethod
    def from_row(row: Mapping[str, Any]) -> ExecutionRecord:
        throttle = json.loads(row["throttle"]) if row.get("throttle") else None
        replicas = json.loads(row["throttled_replicas"]) if row.get("throttled_replicas") else None
        return ExecutionRecord(
            plan_id=row["plan_id"],
            cluster=row["cluster"],
            run_id=row["run_id"],
            batch=int(row["batch"]),
            outcome=Outcome(row["outcome"]),
            recorded_at=row["recorded_at"],
            kind=row.get("kind"),
            started_at=row.get("started_at"),
            ended_at=row.get("ended_at"),
            actions=row.get("actions"),
            bytes_to_move=row.get("bytes_to_move"),
            throttle={int(b): int(r) for b, r in throttle.items()} if throttle else None,
            throttled_topics=tuple(row.get("throttled_topics") or ()),
            estimated_seconds=row.get("estimated_seconds"),
            measured_seconds=row.get("measured_seconds"),
            duration_ratio=row.get("duration_ratio"),
            detail=row.get("detail"),
            throttled_replicas={t: (tuple(v["leader"]), tuple(v["follower"])) for t, v in replicas.items()}
            if replicas is not None
            else None,
        )
