"""Hard goals on placement: replication factor, distinct brokers, racks, drained brokers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..actions import Move
from ..model import DISK, IN, OUT, ClusterModel, distinct_per_row
from ..options import PlannerOptions
from ..search.constants import DEST_TRIES, EPS, LEADERSHIP, REPLICA_MOVE, SWAP
from .base import Goal


def _structurally_valid(move: Move, model: ClusterModel) -> bool:
    if move.kind == LEADERSHIP:
        return model.leader[move.p] == move.src and model.holds(move.p, move.dst) and move.src != move.dst
    ok = model.holds(move.p, move.src) and move.src != move.dst
    if move.kind == SWAP:
        ok = ok and move.q != move.p and model.holds(move.q, move.dst)
    return ok


class ReplicationFactorGoal(Goal):
    """Hard: a move replaces one replica by another, it never adds or drops one.

    An action is accepted if its source_broker holds the replica it gives (for a leadership: leads
    the partition, and the destination_broker holds a replica of it) and, for a swap, its
    destination_broker holds the other partition's replica.
    """

    name = "replication_factor"
    hard = True

    def accept(self, move: Move, model: ClusterModel) -> bool:
        return _structurally_valid(move, model)


class DistinctBrokersGoal(Goal):
    """Hard: no two replicas of a partition on one broker.

    An action is accepted if its destination_broker holds no replica of the partition it receives
    (a swap: the same both ways). Leadership transfers are always accepted.
    """

    name = "distinct_brokers"
    hard = True

    def accept(self, move: Move, model: ClusterModel) -> bool:
        if move.kind == LEADERSHIP:
            return True
        if model.holds(move.p, move.dst):
            return False
        return move.kind != SWAP or not model.holds(move.q, move.src)


class RackAwareGoal(Goal):
    """Hard: replicas span min(RF, racks) racks; never made worse, fixed where possible.

    An action is accepted if each partition it moves keeps at least min(its racks before, its
    rack target) distinct racks. Leadership transfers are always accepted.
    """

    name = "rack_aware"
    hard = True

    def metric(self, model: ClusterModel) -> float:
        return float(len(model.rack_violations()))

    def _ok(self, model: ClusterModel, p: int, src: int, dst: int) -> bool:
        rack = model.rack_of
        if rack[src] == rack[dst]:
            return True  # the replica stays in its rack: the partition spans the racks it did
        before, after = model.racks_kept(p, src, dst)
        return after >= min(before, model.rack_target(p))

    def accept(self, move: Move, model: ClusterModel) -> bool:
        if not model.rack_aware or move.kind == LEADERSHIP:
            return True
        ok = self._ok(model, move.p, move.src, move.dst)
        return bool(ok) and (move.kind != SWAP or self._ok(model, move.q, move.dst, move.src))

    def accepts(self, model: ClusterModel, ps: np.ndarray, srcs: np.ndarray, dst: int) -> np.ndarray:
        """``accept`` of each replica move of ``ps[i]`` from ``srcs[i]`` to ``dst``, vectorized."""
        if not model.rack_aware:
            return np.ones(len(ps), dtype=bool)
        rows = model.replicas[ps]
        racks = np.where(rows >= 0, model.rack[np.maximum(rows, 0)], -1)
        after = np.where(rows == srcs[:, None], model.rack[dst], racks)
        target = np.minimum(distinct_per_row(racks), np.minimum(model.rf[ps], model.n_live_racks))
        kept: np.ndarray = (model.rack[srcs] == model.rack[dst]) | (distinct_per_row(after) >= target)
        return kept

    def dest_mask(self, model: ClusterModel, p: int, src: int) -> np.ndarray | None:
        """Vectorized accept over every destination for moving p's replica off ``src``; None where
        every destination is accepted (the other replicas alone span enough racks)."""
        refused = self.refused_racks(model, p, src)
        if refused is None:
            return np.zeros(model.n_brokers, dtype=bool)
        if not refused:
            return None
        mask = np.ones(model.n_brokers, dtype=bool)
        for r in refused:
            mask &= model.rack != r
        return mask

    def refused_racks(self, model: ClusterModel, p: int, src: int) -> set[int] | None:
        """The racks a destination of p's replica on ``src`` must not be on for ``accept`` to hold:
        none (an empty set) where the other replicas alone span enough racks, the other replicas'
        racks where a new rack is needed, None where no destination is accepted."""
        if not model.rack_aware:
            return set()
        others = model.other_racks(p, src)
        need = min(model.distinct_racks(model.replicas[p]), model.rack_target(p))
        if len(others) >= need:
            return set()
        if len(others) + 1 < need:  # even a new rack leaves the partition short
            return None
        return others  # a rack the other replicas lack

    def dest_masks(self, model: ClusterModel, ps: np.ndarray, src: int) -> np.ndarray | None:
        """``dest_mask`` for many partitions' replicas on ``src``: one row per partition."""
        if not model.rack_aware:
            return None
        rows = model.replicas[ps]
        racks = np.where(rows >= 0, model.rack[np.maximum(rows, 0)], -1)
        others = np.where(rows != src, racks, -1)
        in_others = (model.rack[None, None, :] == others[:, :, None]).any(axis=1)
        new_distinct = distinct_per_row(others)[:, None] + ~in_others
        target = np.minimum(distinct_per_row(racks), np.minimum(model.rf[ps], model.n_live_racks))
        mask: np.ndarray = new_distinct >= target[:, None]
        return mask

    def optimize(self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions) -> None:
        checks = tuple(optimized_goals) + (self,)
        for p in model.rack_violations().tolist():
            if not model.movable[p]:
                continue
            row = model.replicas[p]
            reps = row[row >= 0]
            racks = model.rack[reps]
            dup = [b for b, r in zip(reps.tolist(), racks.tolist()) if (racks == r).sum() > 1]
            dup.sort(key=lambda b: (b == model.leader[p], b))  # followers first: no leadership change
            util = model.util(IN)
            free = model.dest_ok & ~np.isin(model.rack, racks)
            free[reps] = False
            dests = np.nonzero(free)[0]
            dests = dests[np.argsort(util[dests], kind="stable")]
            done = False
            for src in dup:
                for dst in dests.tolist():
                    if self.try_move(Move(REPLICA_MOVE, p, src, dst), model, checks):
                        done = True
                        break
                if done:
                    break


class DrainGoal(Goal):
    """Hard: nothing stays on a drained broker (``PlannerOptions.drain_brokers``).

    An action is accepted if it puts no replica and no leadership on a drained broker.
    ``optimize`` first hands each leadership a drained broker holds to its coolest follower that
    stays (an election, no data), then moves each replica off to the broker that keeps the most
    racks and has the most room. Every replica on a drained broker must be copied once, so the
    drain alone moves exactly their bytes: the least any plan can. A replica that was its
    partition's only copy in a rack goes to a rack the partition lacks where one has room;
    where none does (every such broker drained, full or excluded) the rack target itself has
    shrunk (``ClusterModel.n_live_racks``) or the move is refused, and ``why_not`` says which.
    """

    name = "drain"
    hard = True

    def __init__(self) -> None:
        self.why_not: list[str] = []

    def notes(self) -> tuple[str, ...]:
        return tuple(self.why_not)

    def accept(self, move: Move, model: ClusterModel) -> bool:
        if model.drained[move.dst]:
            return False
        return move.kind != SWAP or not model.drained[move.src]

    def metric(self, model: ClusterModel) -> float:
        if not model.drained.any():
            return 0.0
        on = model.drained[np.maximum(model.replicas, 0)] & (model.replicas >= 0)
        return float(on.sum())

    def optimize(self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions) -> None:
        checks = tuple(optimized_goals) + (self,)
        rack = next((g for g in optimized_goals if isinstance(g, RackAwareGoal)), None)
        self.why_not = []
        drained = np.nonzero(model.drained)[0]
        on = (model.replicas[:, :, None] == drained[None, None, :]).any(axis=2) & (model.replicas >= 0)
        ps = np.nonzero(on.any(axis=1))[0]
        # Biggest first: the big replicas get the destinations with the most room.
        ps = ps[np.argsort(-model.size[ps], kind="stable")]
        avg = {d: max(model.cluster_util(d), EPS) for d in (IN, OUT, DISK)}
        stuck: dict[str, int] = {}
        for p in ps.tolist():
            if not model.movable[p]:
                stuck["excluded topic"] = stuck.get("excluded topic", 0) + int(on[p].sum())
                continue
            a = int(model.leader[p])
            if model.drained[a]:
                followers = [b for b in model.replicas[p].tolist() if b >= 0 and model.dest_ok[b]]
                followers.sort(key=lambda b: (model.util(OUT)[b] / avg[OUT], b))
                for f in followers:
                    if self.try_move(Move(LEADERSHIP, p, a, f), model, checks):
                        break
            for src in [b for b in model.replicas[p].tolist() if b >= 0 and model.drained[b]]:
                if not self._move_off(p, src, model, checks, rack, avg):
                    reason = self._reason(p, src, model, rack)
                    stuck[reason] = stuck.get(reason, 0) + 1
        for reason, n in sorted(stuck.items()):
            self.why_not.append(f"{n} replica(s) left on drained brokers: {reason}")

    def _move_off(
        self,
        p: int,
        src: int,
        model: ClusterModel,
        checks: tuple[Goal, ...],
        rack: RackAwareGoal | None,
        avg: dict[int, float],
    ) -> bool:
        mask = model.dest_ok.copy()
        row = model.replicas[p]
        mask[row[row >= 0]] = False
        if rack is not None:
            rm = rack.dest_mask(model, p, src)
            if rm is not None:
                mask &= rm
        dests = np.nonzero(mask)[0]
        if not len(dests):
            return False
        led = model.leader[p] == src
        score = model.util(IN)[dests] / avg[IN] + model.util(DISK)[dests] / avg[DISK]
        if led:
            score = score + model.util(OUT)[dests] / avg[OUT]
        if model.rack_aware:
            # A rack the partition lacks first: the drained copy may have been its only one there.
            others = row[(row >= 0) & (row != src)]
            score = score + 1e3 * np.isin(model.rack[dests], model.rack[others])
        for dst in dests[np.argsort(score, kind="stable")][: DEST_TRIES * 4].tolist():
            if self.try_move(Move(REPLICA_MOVE, p, src, dst), model, checks):
                return True
        return False

    @staticmethod
    def _reason(p: int, src: int, model: ClusterModel, rack: RackAwareGoal | None) -> str:
        row = model.replicas[p]
        free = model.dest_ok.copy()
        free[row[row >= 0]] = False
        if not free.any():
            return "no broker that stays can take another replica of the partition"
        if rack is not None:
            rm = rack.dest_mask(model, p, src)
            if rm is not None and not (free & rm).any():
                return "every broker that keeps the partition's racks is drained, excluded or holds it"
        if model.options.max_bytes_to_move is not None or model.options.max_moves_per_broker is not None:
            return "max_bytes_to_move / max_moves_per_broker reached, or a hard goal's limit"
        return "every destination would break a hard goal (capacity)"
