"""Traffic-aware partition planner: Cruise Control's goals, small and vectorized with numpy.

    from balancer.planner import plan, PlannerOptions
    result = plan(snapshot, PlannerOptions(balance_threshold=1.10))
    result.to_reassignment()   # kafka-reassign-partitions.sh --execute
    result.to_election()       # kafka-leader-election.sh --election-type preferred

Pure Python + numpy: no Spark, no I/O. Deterministic for equal input.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from .actions import Action, Move
from .goals import (CapacityGoal, DistinctBrokersGoal, DistributionGoal, Goal, GoalError, RackAwareGoal,
                    ReplicationFactorGoal, ResourceGoal, default_goals)
from .model import RESOURCES, ClusterModel, SnapshotError, broker_loads
from .options import PlannerOptions
from .result import Plan, build_actions, figures, total_bytes

__all__ = [
    "Action", "CapacityGoal", "ClusterModel", "DistinctBrokersGoal", "DistributionGoal", "Goal", "GoalError",
    "Move", "Plan", "PlannerOptions", "RackAwareGoal", "ReplicationFactorGoal", "ResourceGoal", "SnapshotError",
    "broker_loads", "default_goals", "plan",
]


def plan(snapshot: Mapping, options: PlannerOptions | None = None, *, goals: list[Goal] | None = None) -> Plan:
    """Plan leadership transfers and replica moves that balance ``snapshot``.

    Raises :class:`SnapshotError` for a malformed snapshot. Hard goals that cannot be met
    (e.g. capacity with nowhere to go) are reported in ``Plan.unsatisfied``, not raised:
    a best-effort plan is still the most useful answer for a live cluster.
    """
    if options is None:
        options = PlannerOptions()
    elif not isinstance(options, PlannerOptions):
        raise TypeError(f"options must be PlannerOptions, got {type(options).__name__}")
    started = time.perf_counter()
    model = ClusterModel(snapshot, options)
    before = figures(model)
    bound = {r: model.lower_bound(i) for i, r in enumerate(RESOURCES)}
    goals = default_goals(options) if goals is None else goals
    reports = []
    optimized: list[Goal] = []
    for goal in goals:
        reports.append(goal.run(model, tuple(optimized), options))
        optimized.append(goal)
    unsatisfied = tuple(f"{r['goal']}: still {r['after']:.4g} outside its limits" for r in reports
                        if r["hard"] and r["after"] > 1e-9)
    actions = build_actions(model)
    return Plan(
        actions=actions,
        before=before,
        after=figures(model),
        lower_bound=bound,
        bytes_to_move=sum(a.bytes_to_move for a in actions),
        leader_moves=sum(1 for a in actions if a.kind == "leadership"),
        replica_moves=sum(a.moved_replicas for a in actions),
        total_bytes=total_bytes(model),
        unsatisfied=unsatisfied,
        goals=tuple(reports),
        seconds=time.perf_counter() - started,
    )
