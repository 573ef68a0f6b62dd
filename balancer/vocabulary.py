"""The words the tables, the planner and the job share, each defined once: plan statuses, action
kinds, telemetry formats and the measured resources. StrEnums, so each member is also its string (as
the tables store it and as JSON and Arrow write it)."""

from __future__ import annotations

from enum import StrEnum

# The resources a broker has a capacity of, in the planner's column order.
RESOURCES = ("network_in", "network_out", "disk")

# The planner's soft goals, by name (config's balancer.goals), in their default priority order.
SOFT_GOALS = (
    "network_in_distribution",
    "network_out_distribution",
    "leader_bytes_in_distribution",
    "disk_distribution",
    "replicas_distribution",
    "leaders_distribution",
)


class PlanStatus(StrEnum):
    """A ``balance_plans`` row's status, then a plan's lifecycle in ``plan_events``."""

    PROPOSED = "proposed"  # actions to carry out (what is left after them: the unmet columns)
    BALANCED = "balanced"  # no action, and every goal within its threshold
    UNBALANCED = "unbalanced"  # no action, and some goal outside its threshold: the unmet columns say why
    SKIPPED = "skipped"  # not planned: the data could not be judged
    WAITING = "waiting"  # not planned: another plan holds the cluster
    EXECUTING = "executing"  # some actions observed
    COMPLETED = "completed"  # all actions observed
    DIVERGED = "diverged"  # a partition went where neither its old nor its new list says
    EXPIRED = "expired"  # no progress within executor.proposal_ttl
    SUPERSEDED = "superseded"  # expired untouched, and a new plan replaces it


class ActionKind(StrEnum):
    LEADERSHIP = "leadership"  # a new preferred leader, no data moves
    REPLICA_MOVE = "replica_move"  # a replica's data moves to another broker
    SWAP = "swap"  # two partitions' replicas trade brokers (a replica move of each)


class TelemetryFormat(StrEnum):
    """What the metrics topic carries (``source.format``)."""

    V1 = "v1"  # balancer/telemetry.py
    CRUISE_CONTROL = "cruise-control"  # Cruise Control's metrics reporter

    @property
    def raw_version(self) -> int:
        """The ``v`` column of this format's rows in ``telemetry_raw``."""
        return _RAW_VERSION[self]


_RAW_VERSION = {TelemetryFormat.V1: 1, TelemetryFormat.CRUISE_CONTROL: 0}
