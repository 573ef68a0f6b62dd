"""A ``Snapshot`` as ``consumer_assignments`` rows: what one read of the consumer groups saw.

One row per group and partition a member is assigned, with its committed and end offsets; one per member
with nothing assigned (``topic`` null), so idle members are on record; one per partition the group
committed that no member holds (``member_id`` null: its lag still counts); and one for a group with neither
(both null), so its state is on record.
"""

from __future__ import annotations

from balancer.consumers.model import Group, Member, Snapshot, TopicPartition

COLUMNS = (
    "cluster",
    "observed_at",
    "group_id",
    "group_protocol",
    "assignor",
    "group_state",
    "members",
    "member_id",
    "client_id",
    "host",
    "group_instance_id",
    "topic",
    "partition",
    "committed_offset",
    "end_offset",
    "lag",
)


def lag(committed: int | None, end: int | None) -> int | None:
    """Records the group has not consumed: end offset − committed offset. Unknown (None) without a commit
    (where the group starts depends on its consumers' ``auto.offset.reset``) or without an end offset."""
    if committed is None or end is None:
        return None
    return max(0, end - committed)  # a commit above the end only after the log was truncated: nothing left


def assignment_rows(snapshot: Snapshot) -> list[dict]:
    rows: list[dict] = []
    for group in snapshot.groups:
        rows.extend(_group_rows(snapshot, group))
    return rows


def _group_rows(snapshot: Snapshot, group: Group) -> list[dict]:
    base = {
        "cluster": snapshot.cluster,
        "observed_at": snapshot.observed_at,
        "group_id": group.group_id,
        "group_protocol": str(group.protocol),
        "assignor": group.assignor,
        "group_state": str(group.state),
        "members": len(group.members),
    }

    def row(member: Member | None, tp: TopicPartition | None) -> dict:
        committed = group.committed.get(tp) if tp is not None else None
        end = snapshot.end_offsets.get(tp) if tp is not None else None
        return {
            **base,
            "member_id": None if member is None else member.member_id,
            "client_id": None if member is None else member.client_id,
            "host": None if member is None else member.host,
            "group_instance_id": None if member is None else member.group_instance_id,
            "topic": None if tp is None else tp[0],
            "partition": None if tp is None else tp[1],
            "committed_offset": committed,
            "end_offset": end,
            "lag": lag(committed, end),
        }

    rows = []
    held: set[TopicPartition] = set()
    for member in group.members:
        if not member.partitions:
            rows.append(row(member, None))
        for tp in member.partitions:
            rows.append(row(member, tp))
            held.add(tp)
    rows.extend(row(None, tp) for tp in sorted(group.committed) if tp not in held)
    if not rows:
        rows.append(row(None, None))
    return rows
