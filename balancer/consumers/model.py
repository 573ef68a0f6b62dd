"""Typed values of consumer telemetry: one read of a cluster's consumer groups, and the advice kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

TopicPartition = tuple[str, int]


class GroupProtocol(StrEnum):
    """How a group's members are assigned partitions: ``classic`` (the client-side assignor of a member
    chosen leader, JoinGroup/SyncGroup) or ``consumer`` (Kafka 4's broker-side protocol, KIP-848)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    UNKNOWN = "unknown"


class GroupState(StrEnum):
    STABLE = "stable"
    PREPARING_REBALANCE = "preparing_rebalance"
    COMPLETING_REBALANCE = "completing_rebalance"
    EMPTY = "empty"
    DEAD = "dead"
    UNKNOWN = "unknown"


class AdviceKind(StrEnum):
    """The cause an advice row names; each has its own recommendation (``advice.RECOMMENDATIONS``)."""

    IDLE_MEMBERS = "idle_members"  # more members than partitions
    HOT_PARTITION = "hot_partition"  # one partition alone exceeds the group's fair share
    RANGE_MULTI_TOPIC = "range_multi_topic"  # the range assignor over a multi-topic subscription
    UNEVEN_ASSIGNMENT = "uneven_assignment"  # the assignment is uneven and none of the above explains it
    REBALANCE_STORM = "rebalance_storm"  # membership changing window after window, members rejoining
    LAG_GROWING_IDLE = "lag_growing_idle"  # lag growing while members have nothing to consume


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None  # static membership (KIP-345); None: dynamic
    partitions: tuple[TopicPartition, ...]  # assigned, sorted

    @property
    def identity(self) -> str:
        """Who the member is across restarts: its static id, else its member id (a restarted dynamic
        member gets a new one, which is what makes its restart a rebalance)."""
        return f"static:{self.group_instance_id}" if self.group_instance_id else f"member:{self.member_id}"


@dataclass(frozen=True)
class Group:
    group_id: str
    protocol: GroupProtocol
    assignor: str  # "range", "roundrobin", "cooperative-sticky", "uniform" (consumer protocol), "" unknown
    state: GroupState
    members: tuple[Member, ...]
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)  # committed offset per partition


@dataclass(frozen=True)
class Snapshot:
    """One read of a cluster's consumer groups: members, assignments, committed and end offsets."""

    cluster: str
    observed_at: datetime
    groups: tuple[Group, ...]
    end_offsets: Mapping[TopicPartition, int]  # log end offset (high watermark) per partition
