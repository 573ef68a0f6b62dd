"""Method advice (seed 000): move replicas, add partitions, add brokers, or do nothing.

Moving replicas and leaderships balances a cluster only as finely as its partitions are cut. A
partition's traffic lands whole on the brokers holding it: its leader serves all of its
network_out (``bytes_out + bytes_in x (RF - 1)``), each replica takes all of its bytes_in. When
that load alone is above the balance band on every broker, no placement fixes the hot spot: the
topic needs more partitions. This is the planner's own lower bound (``ClusterModel.lower_bound``:
a partition's load on the least of the biggest brokers that can hold its replicas, over the cluster's
utilization), here per topic so the advice can name the topic and how many partitions it needs.

A topic with fewer partitions than brokers that carries most of the traffic is the usual way to
get there, but the partition count alone does not decide it: 6 partitions carrying 60% of an
8-broker cluster's traffic are 10% each, below the 13.75% band (1/8 x 1.10), and moving replicas
does balance them. The per-partition test is the exact one; the message names the partition
count when it is below the broker count.

Pure Python + numpy: no Spark, no I/O. Advice is recorded, never executed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from balancer.execution.verdict import unmet_goals
from balancer.planner.model import DISK, IN, OUT, ClusterModel
from balancer.planner.options import PlannerOptions
from balancer.planner.result import Plan

AdviceKind = Literal["move_replicas", "add_partitions", "add_brokers", "cannot_balance", "no_action"]
_TRAFFIC = ((IN, "network_in"), (OUT, "network_out"))
_EPS = 1e-9

ORDERING_CAVEAT = (
    "Adding partitions changes which partition a key goes to (the default partitioner hashes the key modulo "
    "the partition count): records of one key written before and after the change land in different "
    "partitions, so per-key order breaks across the change. If consumers rely on per-key order, stop the "
    "producers, let the consumers drain the topic to its end, add the partitions, then restart the "
    "producers. Existing data stays where it is (the relief comes as new traffic spreads), and a topic's "
    "partition count can never be reduced."
)


@dataclass(frozen=True)
class Advice:
    kind: AdviceKind
    topic: str | None
    message: str
    partitions_to_add: int | None = None
    brokers_to_add: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _mbps(x: float) -> str:
    return f"{x / 1e6:.3g} MB/s"


def advise(
    snapshot_or_model: Mapping[str, Any] | ClusterModel, result: Plan, options: PlannerOptions | None = None
) -> list[Advice]:
    """What to do about the cluster ``result`` was planned for (``snapshot_or_model``: the same
    snapshot, or a :class:`ClusterModel` of it before any move; ``options``: the planner's).

    In this order, each when it applies:

    - ``add_brokers`` per resource whose cluster-wide utilization is above
      ``capacity_threshold``: no placement brings every broker under it. Brokers to add: enough
      brokers of the mean capacity to carry the load at ``capacity_threshold``.
    - ``add_partitions`` per topic with a partition whose load alone is above the balance band
      (``balance_threshold`` x cluster utilization) on the broker with the most capacity, for
      network_in (bytes_in, on every replica) or network_out (the leader's). Partitions to add:
      the topic's total load on that resource over the band of a median-capacity broker, rounded
      up, minus the partitions it has (at least one), assuming keys spread evenly; the larger of
      the two resources' counts. The message carries the ordering caveat for keyed data.
    - ``move_replicas`` when the plan has actions: carry it out (the before -> after figures).
    - ``no_action`` when the plan has none and every goal is within its threshold
      (``balancer.execution.verdict``); ``cannot_balance`` when it has none, some goal is outside
      its threshold, and nothing above explains it.
    """
    if options is None:
        options = PlannerOptions()
    elif not isinstance(options, PlannerOptions):
        raise TypeError(f"options must be PlannerOptions, got {type(options).__name__}")
    if not isinstance(result, Plan):
        raise TypeError(f"result must be a planner Plan, got {type(result).__name__}")
    model = (
        snapshot_or_model
        if isinstance(snapshot_or_model, ClusterModel)
        else ClusterModel(snapshot_or_model, options)
    )
    out: list[Advice] = []
    n = model.n_brokers
    for dim, name in (*_TRAFFIC, (DISK, "disk")):
        load, cap = float(model.load[:, dim].sum()), float(model.cap[:, dim].sum())
        if load / cap > options.capacity_threshold + _EPS:
            needed = math.ceil(load / (cap / n * options.capacity_threshold) - _EPS)
            out.append(
                Advice(
                    "add_brokers",
                    None,
                    f"the cluster's {name} utilization is {_pct(load / cap)}, above the capacity threshold "
                    f"{_pct(options.capacity_threshold)}: no placement brings every broker under it. Add "
                    f"at least {needed - n} broker(s) of the mean capacity ({needed} in all).",
                    brokers_to_add=needed - n,
                )
            )

    out.extend(_partition_advice(model, options))

    if result.actions:
        out.append(
            Advice(
                "move_replicas",
                None,
                f"carry out the plan: {result.leader_moves} leadership transfer(s), {result.replica_moves} "
                f"replica move(s), imbalance {result.imbalance_before:.3f} -> {result.imbalance_after:.3f}.",
            )
        )
    elif not out:
        # The same judgement as the window's status (balancer.execution.verdict): no_action exactly
        # when the window is ``balanced``.
        left = unmet_goals(model, options, result.notes)
        if not left:
            out.append(
                Advice(
                    "no_action",
                    None,
                    "the cluster is within its balance and capacity thresholds: no action needed.",
                )
            )
        else:
            unmet = "; ".join(
                f"{u.goal} {u.figure:.3f} above its threshold {u.threshold:.2f}: {u.binding}" for u in left
            )
            out.append(
                Advice(
                    "cannot_balance",
                    None,
                    f"the cluster is outside its thresholds and the plan proposes nothing: {unmet}.",
                )
            )
    return out


def _partition_advice(model: ClusterModel, options: PlannerOptions) -> list[Advice]:
    if model.n_partitions == 0:
        return []
    names, codes = np.unique(np.asarray(model.topics, dtype=object), return_inverse=True)
    counts = np.bincount(codes, minlength=len(names))
    threshold = options.balance_threshold
    found: dict[int, list[tuple[str, float, float, int]]] = {}
    for dim, name in _TRAFFIC:
        avg = model.cluster_util(dim)
        if avg <= 0:
            continue
        per = (
            model.bytes_in if dim == IN else model.leader_out
        )  # on one broker: a replica's in, the leader's out
        cap = model.cap[:, dim]
        # The band of the least broker each partition's replicas can be on (its leader: the biggest).
        band = model.partition_room(dim) * avg * threshold
        over = per / band
        hot = over > 1 + _EPS
        if not hot.any():
            continue
        band_median = float(np.median(cap)) * avg * threshold
        # Per topic with a hot partition, the one furthest over its band.
        idx = np.flatnonzero(hot)
        idx = idx[np.lexsort((-over[idx], codes[idx]))]
        topics, first = np.unique(codes[idx], return_index=True)
        totals = np.bincount(codes, weights=per, minlength=len(names))
        for t, k in zip(topics.tolist(), idx[first].tolist()):
            target = max(int(counts[t]) + 1, math.ceil(float(totals[t]) / band_median - _EPS))
            found.setdefault(t, []).append((name, float(per[k]), float(band[k]), target))
    out = []
    for t in sorted(found, key=lambda k: str(names[k])):
        partitions = int(counts[t])
        target = max(target for *_, target in found[t])
        reasons = "; ".join(
            f"its busiest partition's {name} is {_mbps(hottest)}, above the {_mbps(band)} band of "
            f"even the largest brokers that can hold it"
            for name, hottest, band, _ in found[t]
        )
        fewer = (
            f" With {partitions} partition(s) on {model.n_brokers} brokers, its traffic cannot spread over "
            "the cluster."
            if partitions < model.n_brokers
            else ""
        )
        out.append(
            Advice(
                "add_partitions",
                str(names[t]),
                f"topic {names[t]!r}: moving replicas cannot fix this hot spot: {reasons}.{fewer} Grow it "
                f"from {partitions} to {target} partitions (add {target - partitions}; kafka-topics.sh "
                f"--alter --topic {names[t]} --partitions {target}), so that each carries at most a median "
                "broker's band if keys spread evenly (a single hot key stays on one partition whatever the "
                f"count). {ORDERING_CAVEAT}",
                partitions_to_add=target - partitions,
            )
        )
    return out
