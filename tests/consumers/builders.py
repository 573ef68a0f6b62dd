"""Consumer group reads and partition rates for the pure tests, built from the typed model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from balancer.consumers.model import Group, GroupProtocol, GroupState, Member, Snapshot
from balancer.consumers.rows import assignment_rows

T0 = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
CLUSTER = "c1"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def member(member_id: str, *partitions: tuple[str, int], client: str | None = None, instance=None) -> Member:
    return Member(
        member_id=member_id,
        client_id=client or member_id.split("-")[0],
        host="/10.0.0.1",
        group_instance_id=instance,
        partitions=tuple(sorted(partitions)),
    )


def group(members, committed=None, *, assignor="range", group_id="g") -> Group:
    return Group(
        group_id=group_id,
        protocol=GroupProtocol.CLASSIC,
        assignor=assignor,
        state=GroupState.STABLE,
        members=tuple(members),
        committed=dict(committed or {}),
    )


def snapshot(seconds: float, *groups: Group, end=None) -> Snapshot:
    return Snapshot(
        cluster=CLUSTER, observed_at=at(seconds), groups=tuple(groups), end_offsets=dict(end or {})
    )


def polls(*snapshots: Snapshot) -> pd.DataFrame:
    return pd.DataFrame([row for s in snapshots for row in assignment_rows(s)])


def rates(per_partition: dict[tuple[str, int], float], record_bytes: float = 100.0) -> pd.DataFrame:
    """partition_load's rate columns: ``bytes_in`` as given, records of ``record_bytes`` each."""
    return pd.DataFrame(
        [
            {"topic": t, "partition": p, "bytes_in": b, "messages_in": b / record_bytes}
            for (t, p), b in per_partition.items()
        ],
        columns=["topic", "partition", "bytes_in", "messages_in"],
    )
