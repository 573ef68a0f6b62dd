"""Is a cluster balanced? Every goal against its threshold, and what binds the ones that are not.

A window is ``balanced`` only when every goal the planner runs is within its threshold:

- ``capacity_<resource>`` (network_in, network_out, disk): no broker's utilization above
  ``capacity_threshold``; figure = the highest utilization.
- ``<resource>_distribution`` (network_in, network_out, disk, leader_bytes_in): figure = the
  resource's balance figure, max utilization / cluster utilization, at most the resource's
  threshold. A resource below its ``low_utilization`` is not balanced by the planner, so it is not
  judged either.
- ``replicas_distribution``, ``leaders_distribution``: counts are whole, so the band is
  ``ceil(average x threshold)``, as the planner's count goals use; figure = max / average.

Only the upper side is judged: that is the balance figure the tables and the README define, and
the side the ranking's HOT flag reads (``balancer.spark.windows.loads.broker_ranking``: a broker above
the threshold times the cluster's utilization, or above the capacity threshold). A HOT broker
therefore always makes its goal unmet, so a window with a HOT broker is never ``balanced``.

Pure Python + numpy: no Spark, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from balancer.planner.model import DIMS, DISK, LBIN, NLEAD, NREP, OUT, ClusterModel
from balancer.planner.options import RESOURCE_GOALS, PlannerOptions
from balancer.planner.result import Plan
from balancer.vocabulary import RESOURCES, SOFT_GOALS, PlanStatus

# Relative slack in the planner's favour when comparing a figure with its threshold: sums taken in
# a different order (Spark's for the ranking, numpy's here) differ in the last bits, and a broker
# the ranking calls HOT must fail the comparison here too.
_REL = 1e-9

# The statuses of a window the planner ran on.
PLANNED = (PlanStatus.PROPOSED, PlanStatus.BALANCED, PlanStatus.UNBALANCED)


@dataclass(frozen=True)
class Unmet:
    """A goal outside its threshold: its figure, the threshold, the least figure any plan can reach,
    and what binds it (a partition too big for any broker's band, a rack, or the brokers left above)."""

    goal: str
    figure: float
    threshold: float
    lower_bound: float
    binding: str
    binding_topic: str | None = None
    binding_partition: int | None = None
    binding_brokers: tuple[int, ...] = ()


def _mb(x: float) -> str:
    return f"{x / 1e6:.3g} MB/s"


def _judged(options: PlannerOptions) -> list[tuple[str, int, float]]:
    """(goal, dim, threshold) for each distribution goal the planner runs."""
    names = options.goals if options.goals is not None else SOFT_GOALS
    by_goal = {goal: resource for resource, goal in RESOURCE_GOALS.items()}
    out = []
    for name in names:
        if name == "leader_bytes_in_distribution":
            out.append((name, LBIN, options.balance_threshold))
        else:
            resource = by_goal[name]
            out.append((name, DIMS.index(resource), options.threshold(resource)))
    return out


def _idle(model: ClusterModel, dim: int, options: PlannerOptions) -> bool:
    resource = DIMS[dim] if dim != LBIN else "network_in"
    low = options.low_utilization_of(resource) if resource in RESOURCE_GOALS else 0.0
    return low > 0 and model.cluster_util(dim) < low


def unmet_goals(model: ClusterModel, options: PlannerOptions, notes: tuple[str, ...] = ()) -> list[Unmet]:
    """Every goal outside its threshold on ``model``'s placement, in the planner's priority order
    (capacity first, then the soft goals in ``options.goals`` order). ``notes``: the planner's
    ``why_not`` (``Plan.notes``), added to what binds a goal that no partition or rack explains."""
    out: list[Unmet] = []
    ids = model.broker_ids
    why = "; ".join(notes)
    for dim, resource in enumerate(RESOURCES):
        util = model.util(dim)
        threshold = options.capacity_threshold
        if util.max() <= threshold * (1 - _REL):
            continue
        over = tuple(int(b) for b in ids[util > threshold * (1 - _REL)].tolist())
        avg = model.cluster_util(dim)
        out.append(
            Unmet(
                f"capacity_{resource}",
                float(util.max()),
                threshold,
                float(model.lower_bound(dim) * avg),
                f"brokers {', '.join(map(str, over))} above {threshold:.0%} {resource} utilization"
                + (f" (the cluster averages {avg:.0%}: it needs more brokers)" if avg > threshold else "")
                + (f"; {why}" if why else ""),
                binding_brokers=over,
            )
        )
    for goal, dim, threshold in _judged(options):
        if dim in (NREP, NLEAD):
            unmet = _count_unmet(model, goal, dim, threshold, why)
        elif _idle(model, dim, options):
            unmet = None
        else:
            unmet = _resource_unmet(model, goal, dim, threshold, why)
        if unmet is not None:
            out.append(unmet)
    return out


def _resource_unmet(model: ClusterModel, goal: str, dim: int, threshold: float, why: str) -> Unmet | None:
    figure = model.balance(dim)
    if figure <= threshold * (1 - _REL):
        return None
    avg = model.cluster_util(dim)
    util = model.util(dim)
    over = tuple(int(b) for b in model.broker_ids[util > avg * threshold * (1 - _REL)].tolist())
    bound = model.lower_bound(dim)
    resource = DIMS[dim]
    if bound > threshold * (1 - _REL) and model.n_partitions:
        p, floor_p = model.partition_floor(dim)
        part_bound = floor_p / avg
        biggest = model.partition_load(dim)
        if p >= 0 and biggest is not None and part_bound >= bound * (1 - _REL):
            topic, partition = model.topics[p], int(model.partition_ids[p])
            amount = f"{biggest[p]:.4g} bytes" if dim == DISK else _mb(float(biggest[p]))
            return Unmet(
                goal,
                figure,
                threshold,
                bound,
                f"partition {topic}-{partition} alone puts {amount} of {resource} on "
                + (
                    "its leader"
                    if dim in (OUT, LBIN)
                    else f"each of its {int(model.rf[p])} replicas' brokers"
                )
                + f": {part_bound:.3f} of the cluster's utilization even on the largest brokers that can "
                f"hold it, above the {threshold:.2f} threshold whatever the placement",
                binding_topic=topic,
                binding_partition=partition,
                binding_brokers=over,
            )
        floor = model.rack_floor(dim)
        level = model.rack_level(dim)
        if level.max() / avg >= bound * (1 - _REL) and floor.max() / avg < bound * (1 - _REL):
            name, brokers = _racks(model, level == 0)
            why_rack = (
                f"can hold one replica of each partition at most, less than its brokers' share: the other "
                f"racks must carry the rest, {bound:.3f} of the cluster's {resource} utilization at least "
                "whatever the placement (more racks, or fewer brokers in that rack, lowers it)"
            )
        else:
            name, brokers = _racks(model, floor >= floor.max() * (1 - _REL))
            why_rack = (
                "must hold a replica of every partition whose replication factor is at least the rack "
                f"count: its brokers cannot go below {bound:.3f} of the cluster's {resource} utilization "
                "whatever the placement (more capacity in that rack lowers it)"
            )
        return Unmet(
            goal,
            figure,
            threshold,
            bound,
            f"rack {name} (brokers {', '.join(map(str, brokers))}) {why_rack}",
            binding_brokers=brokers,
        )
    return Unmet(
        goal,
        figure,
        threshold,
        bound,
        f"brokers {', '.join(map(str, over))} above the {threshold:.2f} band"
        + (
            f"; {why}"
            if why
            else " and no move the plan's limits allow brings them under it "
            "(excluded topics or brokers, max_bytes_to_move, max_moves_per_broker, racks, "
            "or the goals before it)"
        ),
        binding_brokers=over,
    )


def _racks(model: ClusterModel, members: np.ndarray) -> tuple[str, tuple[int, ...]]:
    """The names of the racks of brokers ``members`` (a mask), and those brokers' ids."""
    named = model.rack_names
    names = sorted({named[r] if r < len(named) else "(none)" for r in model.rack[members].tolist()})
    return ", ".join(names), tuple(int(b) for b in model.broker_ids[members].tolist())


def _count_unmet(model: ClusterModel, goal: str, dim: int, threshold: float, why: str) -> Unmet | None:
    live = model.live if model.live.any() else np.ones(model.n_brokers, dtype=bool)
    counts = model.load[:, dim]
    avg = float(counts.sum()) / int(live.sum())
    if avg <= 0:
        return None
    band = math.ceil(avg * threshold - 1e-9)
    if counts.max() <= band:
        return None
    over = tuple(int(b) for b in model.broker_ids[counts > band].tolist())
    return Unmet(
        goal,
        float(counts.max() / avg),
        threshold,
        math.ceil(avg - 1e-9) / avg,
        f"brokers {', '.join(map(str, over))} above {band} {DIMS[dim]} (the band of {threshold:.2f} x the "
        f"average {avg:.1f})" + (f"; {why}" if why else ""),
        binding_brokers=over,
    )


def placed(model: ClusterModel, result: Plan) -> ClusterModel:
    """``model`` (fresh, of the plan's snapshot) with the plan's targets applied: its replicas and
    leaders as the plan leaves them. Returned as it is when the plan has no action."""
    if not result.actions:
        return model
    row = {(model.topics[p], int(model.partition_ids[p])): p for p in range(model.n_partitions)}
    width = model.replicas.shape[1]
    for a in result.actions:
        p = row[(a.topic, a.partition)]
        targets = [model.index[b] for b in a.new_replicas]
        model.replicas[p] = targets + [-1] * (width - len(targets))
        model.leader[p] = model.index[a.new_leader]
    model.load = model._compute_load()
    model._version += 1  # memoized cluster figures were of the old placement
    return model


@dataclass(frozen=True)
class Verdict:
    status: PlanStatus
    unmet: tuple[Unmet, ...]


def judge(
    snapshot_or_model: Mapping[str, Any] | ClusterModel, result: Plan, options: PlannerOptions
) -> Verdict:
    """The status of a window the planner ran on, and the goals left outside their thresholds after
    its plan (before it, when it has no action)."""
    model = (
        snapshot_or_model
        if isinstance(snapshot_or_model, ClusterModel)
        else ClusterModel(snapshot_or_model, options)
    )
    unmet = tuple(unmet_goals(placed(model, result), options, result.notes))
    if result.actions:
        return Verdict(PlanStatus.PROPOSED, unmet)
    return Verdict(PlanStatus.UNBALANCED if unmet else PlanStatus.BALANCED, unmet)
