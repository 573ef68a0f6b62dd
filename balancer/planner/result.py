"""The plan: coalesced per-partition actions plus before/after figures and Kafka's JSON files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from balancer.vocabulary import RESOURCES, ActionKind

from .actions import Action
from .model import ClusterModel

UNMET_TOLERANCE = 1e-9  # a hard goal's metric (distance outside its limits) above this is unmet


@dataclass(frozen=True)
class GoalReport:
    """What one goal did in a plan: its metric (distance outside its limits) before and after, whether
    it was violated when it ran, and the moves it applied; over several sweeps, the first before and
    the last after."""

    goal: str
    hard: bool
    before: float
    after: float
    violated: bool
    moves: int
    # No broker outside the band that makes the goal act (its threshold; a hard goal's limits) on
    # the plan's placement: the goal would propose nothing there. A soft goal optimizes into a
    # narrower band, so ``after`` can be above 0 while this holds.
    within_threshold: bool = False

    @property
    def unmet(self) -> bool:
        """A hard goal left outside its limits."""
        return self.hard and self.after > UNMET_TOLERANCE

    def then(self, later: GoalReport) -> GoalReport:
        """This report followed by ``later``, the same goal's in the next sweep."""
        return GoalReport(
            self.goal,
            self.hard,
            self.before,
            later.after,
            self.violated or later.violated,
            self.moves + later.moves,
            later.within_threshold,
        )


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    before: dict[str, float]
    after: dict[str, float]
    lower_bound: dict[str, float]
    bytes_to_move: int
    leader_moves: int
    replica_moves: int
    total_bytes: int = 0  # all data on the cluster (every replica)
    unsatisfied: tuple[str, ...] = ()  # hard goals the plan could not meet, with why
    goals: tuple[GoalReport, ...] = field(default=(), compare=False)  # per goal, in the order they ran
    seconds: float = field(default=0.0, compare=False)
    drain_brokers: tuple[int, ...] = ()  # broker ids the plan empties (the checker verifies it)
    notes: tuple[str, ...] = field(default=(), compare=False)  # why a goal could not do all it was asked

    @property
    def unmet_goals(self) -> tuple[str, ...]:
        """The hard goals the plan leaves outside their limits (``unsatisfied`` says by how much)."""
        return tuple(r.goal for r in self.goals if r.unmet)

    @property
    def imbalance_before(self) -> float:
        return max(self.before["network_in"], self.before["network_out"])

    @property
    def imbalance_after(self) -> float:
        return max(self.after["network_in"], self.after["network_out"])

    def to_reassignment(self) -> dict[str, Any]:
        """Kafka's reassignment JSON (``kafka-reassign-partitions.sh --execute``): changed partitions only."""
        parts = [
            {
                "topic": a.topic,
                "partition": a.partition,
                "replicas": list(a.new_replicas),
                "log_dirs": ["any"] * len(a.new_replicas),
            }
            for a in self.actions
            if a.new_replicas != a.old_replicas
        ]
        return {"version": 1, "partitions": parts}

    def to_election(self) -> dict[str, Any]:
        """``kafka-leader-election.sh --election-type preferred`` JSON: partitions whose leader changes."""
        return {
            "partitions": [
                {"topic": a.topic, "partition": a.partition}
                for a in self.actions
                if a.new_leader != a.old_leader
            ]
        }

    def summary(self) -> str:
        lines = [f"{'resource':<12} {'before':>8} {'after':>8} {'bound':>8}"]
        for r in RESOURCES:
            lines.append(f"{r:<12} {self.before[r]:>8.3f} {self.after[r]:>8.3f} {self.lower_bound[r]:>8.3f}")
        share = self.bytes_to_move / self.total_bytes if self.total_bytes else 0.0
        lines.append(
            f"leadership transfers: {self.leader_moves}, replica moves: {self.replica_moves}, "
            f"data moved: {_human(self.bytes_to_move)} ({share:.2%} of {_human(self.total_bytes)})"
        )
        lines.append(
            f"imbalance (max of network in/out): {self.imbalance_before:.3f} -> {self.imbalance_after:.3f}"
            f" in {self.seconds:.2f}s"
        )
        for problem in self.unsatisfied:
            lines.append(f"UNSATISFIED hard goal: {problem}")
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000.0
    return str(n)


def build_actions(model: ClusterModel) -> tuple[Action, ...]:
    """One action per changed partition (moves coalesced); leadership transfers first."""
    touched = np.fromiter(model.touched, dtype=np.int64, count=len(model.touched))
    # Whole columns to Python at once: a plan may change a million partitions.
    ids = [int(b) for b in model.broker_ids]
    old_rows = model.orig_replicas[touched].tolist()
    new_rows = model.replicas[touched].tolist()
    old_leaders = model.orig_leader[touched].tolist()
    new_leaders = model.leader[touched].tolist()
    sizes = model.size[touched].tolist()
    partitions = model.partition_ids[touched].tolist()
    leaderships: list[Action] = []
    moves: list[Action] = []
    for i, p in enumerate(touched.tolist()):
        old = [ids[b] for b in old_rows[i] if b >= 0]
        new = [ids[b] for b in new_rows[i] if b >= 0]
        old_leader, new_leader = ids[old_leaders[i]], ids[new_leaders[i]]
        # Intended leader first, the rest in their original slots' order.
        new_ordered = [new_leader] + [b for b in new if b != new_leader]
        same_set = set(old) == set(new)
        if same_set and old_leader == new_leader:
            continue  # moved away and back
        size = round(sizes[i])
        if same_set:
            kind = ActionKind.LEADERSHIP
            moved = 0
        else:
            kind = ActionKind.SWAP if p in model.swapped else ActionKind.REPLICA_MOVE
            moved = size * len(set(new) - set(old))
        action = Action(
            kind=kind,
            topic=model.topics[p],
            partition=partitions[i],
            old_replicas=tuple(old),
            new_replicas=tuple(new_ordered),
            old_leader=old_leader,
            new_leader=new_leader,
            bytes_to_move=moved,
        )
        (leaderships if kind == ActionKind.LEADERSHIP else moves).append(action)
    return tuple(leaderships + moves)


def figures(model: ClusterModel) -> dict[str, float]:
    return {r: model.balance(i) for i, r in enumerate(RESOURCES)}


def total_bytes(model: ClusterModel) -> int:
    return round(float(np.sum(model.size * model.rf)))
