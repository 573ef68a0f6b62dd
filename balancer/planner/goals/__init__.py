"""Goals: small plug-ins with one contract (after Cruise Control's AbstractGoal).

``name``, ``hard``, ``accept(move, model) -> bool``, ``optimize(model, optimized_goals, options)``.
Goals run in priority order; every move a goal proposes must be accepted by each goal already
optimized, so later goals never undo earlier ones. ``run`` measures the goal's own metric
before and after ``optimize`` and raises :class:`GoalError` if it got worse.

Modules: ``base`` (the contract), ``hard`` (placement), ``resource`` (the resource goal hooks and
the capacity goals), ``distribution`` (the soft goals); the registry of soft goals is here.
"""

from __future__ import annotations

from balancer.vocabulary import SOFT_GOALS

from ..options import PlannerOptions
from .base import Goal, GoalError
from .distribution import (
    CountDistributionGoal,
    DiskDistributionGoal,
    DistributionGoal,
    LeaderBytesInDistributionGoal,
    LeaderCountDistributionGoal,
    NetworkInDistributionGoal,
    NetworkOutDistributionGoal,
    ReplicaCountDistributionGoal,
)
from .hard import DistinctBrokersGoal, DrainGoal, RackAwareGoal, ReplicationFactorGoal
from .resource import (
    BALANCE_MARGIN,
    BOUND_TOLERANCE,
    MIN_GAIN_SHARE,
    MOVE_OVERHEAD_SCALE,
    TARGET_OVER_BOUND,
    CapacityGoal,
    DiskCapacityGoal,
    DiskGoal,
    NetworkInCapacityGoal,
    NetworkInGoal,
    NetworkOutCapacityGoal,
    NetworkOutGoal,
    ResourceGoal,
)

__all__ = [
    "BALANCE_MARGIN",
    "BOUND_TOLERANCE",
    "MIN_GAIN_SHARE",
    "MOVE_OVERHEAD_SCALE",
    "SOFT_GOAL_CLASSES",
    "SOFT_GOAL_REGISTRY",
    "TARGET_OVER_BOUND",
    "CapacityGoal",
    "CountDistributionGoal",
    "DiskCapacityGoal",
    "DiskDistributionGoal",
    "DiskGoal",
    "DistinctBrokersGoal",
    "DistributionGoal",
    "DrainGoal",
    "Goal",
    "GoalError",
    "LeaderBytesInDistributionGoal",
    "LeaderCountDistributionGoal",
    "NetworkInCapacityGoal",
    "NetworkInDistributionGoal",
    "NetworkInGoal",
    "NetworkOutCapacityGoal",
    "NetworkOutDistributionGoal",
    "NetworkOutGoal",
    "RackAwareGoal",
    "ReplicaCountDistributionGoal",
    "ReplicationFactorGoal",
    "ResourceGoal",
    "default_goals",
]

# The one registry of soft goals: their classes, by the names config and options accept
# (balancer.vocabulary's SOFT_GOALS, in their default priority order). Each builds itself from the
# options (``DistributionGoal.from_options``).
SOFT_GOAL_CLASSES: tuple[type[DistributionGoal], ...] = (
    NetworkInDistributionGoal,
    NetworkOutDistributionGoal,
    LeaderBytesInDistributionGoal,
    DiskDistributionGoal,
    ReplicaCountDistributionGoal,
    LeaderCountDistributionGoal,
)
SOFT_GOAL_REGISTRY: dict[str, type[DistributionGoal]] = {cls.name: cls for cls in SOFT_GOAL_CLASSES}
if tuple(SOFT_GOAL_REGISTRY) != SOFT_GOALS:
    raise ImportError("SOFT_GOAL_REGISTRY must name balancer.vocabulary.SOFT_GOALS, in their order")


def default_goals(options: PlannerOptions) -> list[Goal]:
    """Priority order: hard goals, then the soft goals of ``options.goals`` in its order (default:
    traffic, leader bytes-in, disk, replica and leader counts), each with its resource's
    threshold and low-utilization threshold."""
    ct = options.capacity_threshold
    names = options.goals if options.goals is not None else SOFT_GOALS
    return [
        ReplicationFactorGoal(),
        DistinctBrokersGoal(),
        RackAwareGoal(),
        DrainGoal(),
        NetworkInCapacityGoal(ct),
        NetworkOutCapacityGoal(ct),
        DiskCapacityGoal(ct),
    ] + [SOFT_GOAL_REGISTRY[name].from_options(options) for name in names]
