"""Goals: small plug-ins with one contract (after Cruise Control's AbstractGoal).

``name``, ``hard``, ``accept(move, model) -> bool``, ``optimize(model, optimized_goals, options)``.
Goals run in priority order; every move a goal proposes must be accepted by each goal already
optimized, so later goals never undo earlier ones. ``run`` measures the goal's own metric
before and after ``optimize`` and raises :class:`GoalError` if it got worse.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Self

import numpy as np

from balancer.vocabulary import SOFT_GOALS

from .actions import Move
from .model import DISK, IN, LBIN, NLEAD, NREP, OUT, ClusterModel
from .options import PlannerOptions
from .result import GoalReport
from .search import SearchContext
from .search import optimize as search
from .search.constants import DEST_TRIES, EPS, LEADERSHIP, REPLICA_MOVE, SWAP

# Hysteresis (Cruise Control's balance margin and violation threshold): a distribution goal acts
# only when a broker is outside balance_threshold (or more than BOUND_TOLERANCE above the bound
# where the bound is higher), and then optimizes to the tighter band 1 +- BALANCE_MARGIN x
# (threshold - 1). A freshly balanced cluster thus sits ~1% inside the band that triggers a plan,
# and re-measuring it with a few % noise per partition does not trigger another one.
BALANCE_MARGIN = 0.9
BOUND_TOLERANCE = 0.02
# Minimum excess: a traffic/disk distribution goal moves nothing for a pair of brokers whose
# combined distance outside the target band is below MIN_GAIN_SHARE of the cluster's average
# utilization (measurement noise), e.g. a leadership handed over to lift a broker from 0.908 to the
# 0.91 target. Above that, any move that cuts the excess counts, however small: with ~4,900
# replicas per broker (270 brokers, 1.3M replicas) one replica carries ~0.02% of a broker's load, so a
# minimum gain per move (say 0.5% of the average) would reject nearly every single move there and
# leave network_out far above its target.
MIN_GAIN_SHARE = 0.005
# Fixed cost charged per replica move when ranking by relief per byte, as a multiple of the
# model's move_overhead (half the mean partition size): 2 mean partitions per move. Fewer, bigger
# moves disturb later goals less and spare operators a long tail of small moves: on the 7-broker
# LinkedIn-like benchmark scenario 4x takes 179 replica moves (2.37% of data) where 1x takes 624
# (2.03%) down the small short-retention partitions. Above 4x, replanning an executed plan starts
# to move replicas again (the demo cluster's stability test).
MOVE_OVERHEAD_SCALE = 4.0


class GoalError(RuntimeError):
    """A goal broke its own contract (made its own metric worse)."""


class Goal:
    name = "goal"
    hard = False
    all_or_nothing = False  # keep this goal's moves only if they bring it within its band

    def accept(self, move: Move, model: ClusterModel) -> bool:
        return True

    def reset(self) -> None:
        """Forget limits cached for a model: the next sweep computes them from today's loads."""

    def metric(self, model: ClusterModel) -> float:
        """Lower is better; 0 means satisfied."""
        return 0.0

    def violated(self, model: ClusterModel) -> bool:
        """The goal has work to do (soft goals: some broker is outside the band that triggers a plan)."""
        return self.metric(model) > EPS

    def optimize(self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions) -> None:
        return None

    def notes(self) -> tuple[str, ...]:
        """Why the goal could not do all it was asked in its last ``optimize`` (for ``Plan.notes``)."""
        return ()

    def run(
        self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions
    ) -> GoalReport:
        before = self.metric(model)
        violated = self.violated(model)
        moves = model.moves_applied
        mark, swapped = len(model.log), set(model.swapped)
        if violated:
            self.optimize(model, tuple(optimized_goals), options)
        after = self.metric(model)
        if violated and self.all_or_nothing and self.violated(model):
            # An unfixable violation proposes nothing (Cruise Control's goal violation detector):
            # otherwise the moves that noise happens to allow creep in, a few every window.
            model.undo_to(mark, swapped)
            after, moves = self.metric(model), model.moves_applied
        if after > before + EPS * max(1.0, abs(before)):
            raise GoalError(f"goal {self.name} made its own metric worse: {before:.6g} -> {after:.6g}")
        return GoalReport(self.name, self.hard, before, after, violated, model.moves_applied - moves)

    @staticmethod
    def try_move(move: Move, model: ClusterModel, optimized_goals: Sequence[Goal]) -> bool:
        """Apply ``move`` if the plan's caps allow it and no optimized goal vetoes it."""
        for goal in optimized_goals:
            if not goal.accept(move, model):
                return False
        if not model.allowed(move) or not model.within_caps(move):
            return False
        model.apply(move)
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


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
        row = model.replicas[p]
        new = row.copy()
        new[new == src] = dst
        before = model.distinct_racks(row)
        return model.distinct_racks(new) >= min(before, model.rack_target(p))

    def accept(self, move: Move, model: ClusterModel) -> bool:
        if not model.rack_aware or move.kind == LEADERSHIP:
            return True
        ok = self._ok(model, move.p, move.src, move.dst)
        return bool(ok) and (move.kind != SWAP or self._ok(model, move.q, move.dst, move.src))

    def dest_mask(self, model: ClusterModel, p: int, src: int) -> np.ndarray | None:
        """Vectorized accept over every destination for moving p's replica off ``src``."""
        if not model.rack_aware:
            return None
        row = model.replicas[p]
        others = row[(row >= 0) & (row != src)]
        other_racks = np.unique(model.rack[others])
        before = model.distinct_racks(row)
        new_distinct = len(other_racks) + ~np.isin(model.rack, other_racks)
        return new_distinct >= min(before, model.rack_target(p))

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


class ResourceGoal(Goal):
    """Keeps each broker's utilization of one dimension within [lower, upper] limits.

    An action is accepted if its destination_broker stays at or under its upper limit and its
    source_broker at or over its lower limit on this goal's dimension (a swap: both ways). The
    metric is the total distance outside the limits.

    Hooks a resource goal sets or overrides (its search, shared by every resource goal, is
    ``balancer.planner.search``, which reads these hooks and changes no goal):

    * ``dim``: the resource (a column of ``ClusterModel.load``) and ``per_replica(model, ps)``, what
      one replica of each partition carries of it (``leader_borne``: only the leader's replica);
    * ``compute_limits(model) -> (upper, lower)``: per-broker utilization limits (required);
    * ``leadership`` / ``moves`` / ``swaps``: which kinds of action it may propose;
    * ``relief(model, ps, brokers)``: what moving each replica off its broker takes from the dimension;
    * ``move_key`` / ``leadership_key``: the order candidates are tried in (ascending);
    * ``sheds_best_fit`` / ``covers`` / ``chains_leadership``: how a broker over its limit is shed;
    * ``slack(model)`` / ``min_gain(model, excess)``: what is too little to act on;
    * ``guards``: dimensions optimized later that its moves must not push past the threshold.
    """

    dim: int  # the resource this goal keeps within its limits (model.IN, OUT, DISK, ...)

    threshold: float  # CapacityGoal: the utilization ceiling; DistributionGoal: max / average
    leadership = False  # may transfer leadership (no data moves)
    covers = False  # sheds by best fit: one replica that alone covers the excess, least data first
    prefers_disk_room = False  # replica moves go where disk stays within the disk goal's target first
    moves = True  # may move replicas
    swaps = True  # may swap two replicas when no plain move helps
    leader_borne = False  # only a partition's leader replica carries the resource (moves with leadership)
    # Every replica carries some of the resource, in amounts that differ: a broker under this goal's
    # lower limit can give a replica away only for one that carries exactly as much.
    carried_by_every_replica = False
    sheds_best_fit = False  # sheds by relief per byte, the smallest replica that covers the excess first
    chains_leadership = False  # a leadership whose follower lacks room may go on by a chain of two transfers

    def __init__(self) -> None:
        self._cache: tuple[int, np.ndarray, np.ndarray] | None = None
        self._trigger_cache: tuple[int, np.ndarray, np.ndarray] | None = None
        self._idle_memo: tuple[int, bool] | None = None

    def compute_limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def reset(self) -> None:
        self._cache = None
        self._trigger_cache = None
        self._idle_memo = None

    def limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        # Totals per dimension never change under moves, so limits are fixed for a model.
        if self._cache is None or self._cache[0] != id(model):
            upper, lower = self.compute_limits(model)
            self._cache = (id(model), upper, lower)
        return self._cache[1], self._cache[2]

    def metric(self, model: ClusterModel) -> float:
        upper, lower = self.limits(model)
        u = model.util(self.dim)
        return float(np.maximum(u - upper, 0).sum() + np.maximum(lower - u, 0).sum())

    def term(self, model: ClusterModel, b: int, load: float) -> float:
        """Broker ``b``'s distance outside this goal's limits if it carried ``load``."""
        upper, lower = self.limits(model)
        u = load / model.cap[b, self.dim]
        return float(max(u - upper[b], 0.0) + max(lower[b] - u, 0.0))

    margin = 0.0  # utilization a move must keep clear of the limits (see held_clear)

    def held_clear(self, margin: float) -> Self:
        """This goal as a check that accepts a move only if it keeps ``margin`` of utilization clear of
        the limits: a copy, so that the goal itself is left as it is."""
        held = copy.copy(self)
        held.margin = margin
        return held

    def accept(self, move: Move, model: ClusterModel) -> bool:
        d = model.delta(move)[self.dim]
        if d == 0:
            return True
        upper, lower = self.limits(model)
        gain, lose = (move.dst, move.src) if d > 0 else (move.src, move.dst)
        d = abs(d)
        cap = model.cap[:, self.dim]
        tol = EPS * max(1.0, abs(upper[gain])) - self.margin
        return bool(
            (model.load[gain, self.dim] + d) / cap[gain] <= upper[gain] + tol
            and (model.load[lose, self.dim] - d) / cap[lose] >= lower[lose] - tol
        )

    def improves(self, move: Move, model: ClusterModel) -> bool:
        d = model.delta(move)[self.dim]
        if d == 0:
            return False
        s, t = move.src, move.dst
        ls, lt = model.load[s, self.dim], model.load[t, self.dim]
        before = self.term(model, s, ls) + self.term(model, t, lt)
        after = self.term(model, s, ls - d) + self.term(model, t, lt + d)
        return bool(before - after >= self.min_gain(model, before))

    def slack(self, model: ClusterModel) -> float:
        """How far outside its limits a broker may stay without this goal working on it."""
        return EPS

    def min_gain(self, model: ClusterModel, excess: float) -> float:
        """Least cut of this goal's excess (utilization units) a move must bring, given the two
        brokers' ``excess`` outside the limits before it."""
        return EPS * 1e-3

    def min_gain_array(self, model: ClusterModel, excess: np.ndarray) -> np.ndarray:
        """``min_gain`` for many excesses at once."""
        return np.full(len(excess), self.min_gain(model, 0.0))

    guards: tuple[int, ...] = ()  # dimensions optimized later that this goal must not unbalance

    def wants(self, move: Move, model: ClusterModel, guard_ratio: float | None = None) -> bool:
        """Improves this goal, and pushes no broker past ``guard_ratio`` x the cluster utilization
        (default: the threshold) on a guarded dimension.

        network_in moves may carry leadership along; without the guard they could make
        network_out worse than before (network_out is optimized only afterwards).
        """
        return self.improves(move, model) and self._guard_ok(move, model, guard_ratio)

    def _guard_ok(self, move: Move, model: ClusterModel, guard_ratio: float | None) -> bool:
        """``move`` pushes no broker past the guard ceiling on a guarded dimension (see ``wants``)."""
        if not self.guards:
            return True
        vec = model.delta(move)
        for g in self.guards:
            v = vec[g]
            if v == 0:
                continue
            gain = move.dst if v > 0 else move.src
            ratio = guard_ratio if guard_ratio is not None else self.threshold
            if (model.load[gain, g] + abs(v)) / model.cap[gain, g] > ratio * model.cluster_util(g) + EPS:
                return False
        return True

    # ---- candidate ordering --------------------------------------------------------------
    def per_replica(self, model: ClusterModel, ps: np.ndarray | slice) -> np.ndarray:
        """What one replica of each of partitions ``ps`` carries of this goal's resource (for a
        ``leader_borne`` resource: the leader's replica)."""
        raise NotImplementedError

    def relief(self, model: ClusterModel, ps: np.ndarray, brokers: np.ndarray | int) -> np.ndarray:
        """What moving each partition's replica off its broker takes from this dimension."""
        carried = self.per_replica(model, ps)
        if self.leader_borne:
            led: np.ndarray = carried * (model.leader[ps] == brokers).astype(np.float64)
            return led
        return carried

    def move_key(
        self, model: ClusterModel, ps: np.ndarray, relief: np.ndarray, brokers: np.ndarray | int
    ) -> np.ndarray:
        """Sort key (ascending = tried first) for moving ``ps``' replicas off ``brokers``: the most
        relief per byte moved first, a fixed cost per move counted as bytes."""
        return -_bucketed(relief / (model.size[ps] + MOVE_OVERHEAD_SCALE * model.move_overhead), relief)

    def leadership_key(self, model: ClusterModel, ps: np.ndarray) -> np.ndarray:
        """Sort key (ascending = tried first) for handing ``ps``' leaderships on: the most relief first."""
        return -self.relief(model, ps, model.leader[ps])

    # ---- search --------------------------------------------------------------------------
    def optimize(self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions) -> None:
        search(self.search_context(model, optimized_goals, options))

    def search_context(
        self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions
    ) -> SearchContext:
        """The context of this goal's search: the goals already optimized judge its moves; the
        resource goals among them that are not idle (an idle goal vetoes nothing) screen them."""
        optimized = tuple(optimized_goals)
        res_goals = tuple(
            g
            for g in optimized
            if isinstance(g, ResourceGoal) and not (isinstance(g, DistributionGoal) and g.idle(model))
        ) + (self,)
        return SearchContext(
            model=model,
            goal=self,
            optimized=optimized,
            checks=optimized + (self,),
            res_goals=res_goals,
            rack=next((g for g in optimized if isinstance(g, RackAwareGoal)), None),
            options=options,
            disk_line=model.cluster_util(DISK) * (1.0 + BALANCE_MARGIN * (options.disk_threshold - 1.0)),
        )

    def sets_figure(self, model: ClusterModel, a: int) -> bool:
        """``a`` is the hottest broker and more than 2% above the bound."""
        util = model.util(self.dim)
        return bool(
            util[a] >= util.max() - EPS
            and util[a] > 1.02 * model.lower_bound(self.dim) * model.cluster_util(self.dim)
        )

    def over(self, model: ClusterModel, b: int) -> bool:
        """Broker ``b`` is above its upper limit by more than the slack: the search sheds it."""
        upper, _ = self.limits(model)
        return bool(model.load[b, self.dim] / model.cap[b, self.dim] > upper[b] + self.slack(model))

    def fits(self, move: Move, model: ClusterModel) -> bool:
        """The receiving broker stays within this goal's upper limit."""
        upper, _ = self.limits(model)
        d = model.delta(move)[self.dim]
        b = move.dst if d > 0 else move.src
        return bool((model.load[b, self.dim] + abs(d)) / model.cap[b, self.dim] <= upper[b] + EPS)

    def under(self, model: ClusterModel, b: int) -> bool:
        """Broker ``b`` is below its lower limit by more than the slack: the search fills it."""
        _, lower = self.limits(model)
        return bool(model.load[b, self.dim] / model.cap[b, self.dim] < lower[b] - self.slack(model))


def _lightest_within(loads: np.ndarray, room: float) -> int:
    """How many of ``loads`` fit, together, within ``room``: the lightest first."""
    if room < 0:
        return 0
    return int(np.searchsorted(np.cumsum(np.sort(loads)), room, side="right"))


def _bucketed(ratio: np.ndarray, relief: np.ndarray) -> np.ndarray:
    """Relief per byte in 10% buckets, then the bigger relief first within a bucket.

    Exact ratios tie for a whole topic (same retention), which would favour its tiniest
    partitions: many moves for the same bytes. Bucketing trades <=10% bytes for far fewer moves.
    """
    if not len(ratio):
        return ratio
    bucket = np.floor(np.log(np.maximum(ratio, 1e-300)) / np.log(1.1))
    top = relief.max()
    key: np.ndarray = bucket + (relief / top * 0.999 if top > 0 else 0.0)
    return key


class NetworkInGoal(ResourceGoal):
    """A goal on network_in: every replica of a partition carries its bytes in (leader or not)."""

    dim = IN
    carried_by_every_replica = True
    sheds_best_fit = True

    def per_replica(self, model: ClusterModel, ps: np.ndarray | slice) -> np.ndarray:
        return model.bytes_in[ps]

    def move_key(
        self, model: ClusterModel, ps: np.ndarray, relief: np.ndarray, brokers: np.ndarray | int
    ) -> np.ndarray:
        # Followers first within a bucket: moving a leader replica drags its network_out along.
        key: np.ndarray = super().move_key(model, ps, relief, brokers) + 0.5 * (model.leader[ps] == brokers)
        return key


class NetworkOutGoal(ResourceGoal):
    """A goal on network_out: a partition's leader serves it (its consumers and its followers),
    so leadership transfers move it without moving data."""

    dim = OUT
    leader_borne = True
    leadership = True
    sheds_best_fit = True
    chains_leadership = True

    def per_replica(self, model: ClusterModel, ps: np.ndarray | slice) -> np.ndarray:
        return model.leader_out[ps]


class DiskGoal(ResourceGoal):
    """A goal on disk: every replica of a partition holds its size."""

    dim = DISK
    carried_by_every_replica = True

    def per_replica(self, model: ClusterModel, ps: np.ndarray | slice) -> np.ndarray:
        return model.size[ps]

    def move_key(
        self, model: ClusterModel, ps: np.ndarray, relief: np.ndarray, brokers: np.ndarray | int
    ) -> np.ndarray:
        # Coldest data first (most bytes per unit of traffic): disk relief that leaves the
        # traffic balance, already settled, undisturbed; the biggest first within 10% of
        # coldness. Measured rates carry noise: an exact ratio would order a retention class by
        # noise, not size, and make many more, smaller moves (benchmarks/planning_bench.py).
        return -_bucketed(model.size[ps] / (model.bytes_in[ps] + 1.0), relief)


class CapacityGoal(ResourceGoal):
    """Hard: every broker's utilization of the goal's resource <= capacity_threshold.

    An action is accepted if the broker that gains load stays at or under the threshold. There is
    no lower limit.
    """

    hard = True

    def __init__(self, threshold: float) -> None:
        super().__init__()
        self.threshold = threshold

    def compute_limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        n = model.n_brokers
        return np.full(n, self.threshold), np.full(n, -np.inf)


class NetworkInCapacityGoal(NetworkInGoal, CapacityGoal):
    """Hard: network_in <= capacity_threshold on every broker. Acts by replica moves and swaps."""

    name = "capacity_network_in"


class NetworkOutCapacityGoal(NetworkOutGoal, CapacityGoal):
    """Hard: network_out <= capacity_threshold on every broker. Acts by leadership transfers (and
    chains of two), then replica moves and swaps."""

    name = "capacity_network_out"


class DiskCapacityGoal(DiskGoal, CapacityGoal):
    """Hard: disk <= capacity_threshold on every broker. Acts by replica moves and swaps, the
    coldest data first."""

    name = "capacity_disk"


class DistributionGoal(ResourceGoal):
    """Soft: utilization within balance_threshold of the cluster average (both sides where
    ``lower``).

    An action is accepted if the broker that gains load stays at or under the upper limit of the
    band it optimizes to and the broker that loses load at or over the lower one; always while
    the cluster's utilization is under ``low_utilization`` (the goal is idle). It acts only when
    some broker is outside the wider band that triggers a plan (``trigger_limits``).
    """

    lower = True  # the band has a lower limit: under-loaded brokers are filled

    def __init__(self, threshold: float, *, low_utilization: float = 0.0) -> None:
        super().__init__()
        self.threshold = threshold
        # Below this cluster-wide utilization the resource is left alone (Cruise Control's
        # low.utilization.threshold): the goal neither acts nor vetoes other goals' moves.
        self.low_utilization = low_utilization

    # The options' name of the resource whose threshold and low-utilization threshold this goal
    # takes (PlannerOptions.threshold, low_utilization_of).
    resource = ""

    @classmethod
    def from_options(cls, options: PlannerOptions) -> Self:
        """This goal with its resource's balance threshold and low-utilization threshold."""
        return cls(options.threshold(cls.resource), low_utilization=options.low_utilization_of(cls.resource))

    def compute_limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        return self._band(model, trigger=False)

    def optimize(self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions) -> None:
        if not self.all_or_nothing:
            return super().optimize(model, optimized_goals, options)
        # The goals squeezed between the traffic limits (all or nothing) keep their moves a noise
        # margin clear of those limits: a fix that fits only by a hair would otherwise be out of
        # reach in one window and, with a few % of re-measured rates, within reach in the next
        # (and move data for noise).
        held = tuple(
            g.held_clear(g.slack(model)) if isinstance(g, DistributionGoal) and not g.all_or_nothing else g
            for g in optimized_goals
        )
        if self.out_of_reach(model, held):
            return  # every move it made would be undone: none is made
        super().optimize(model, held, options)

    def out_of_reach(self, model: ClusterModel, optimized: Sequence[Goal]) -> bool:
        """Some broker outside the band cannot get inside it whatever the search does (an all or
        nothing goal then makes no move). By default never known."""
        return False

    def trigger_limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        """The band whose violation makes this goal act (wider than the band it optimizes to)."""
        cache = self._trigger_cache
        if cache is None or cache[0] != id(model):
            cache = (id(model),) + self._band(model, trigger=True)
            self._trigger_cache = cache
        return cache[1], cache[2]

    def idle(self, model: ClusterModel) -> bool:
        """The cluster's utilization of this resource is under ``low_utilization``."""
        if self.low_utilization <= 0:
            return False
        memo = self._idle_memo
        if memo is None or memo[0] != id(model):
            # Moves leave the cluster's total load as it is: decided once per model.
            memo = self._idle_memo = (id(model), model.cluster_util(self.dim) < self.low_utilization)
        return memo[1]

    def accept(self, move: Move, model: ClusterModel) -> bool:
        return self.idle(model) or super().accept(move, model)

    def violated(self, model: ClusterModel) -> bool:
        if self.idle(model):
            return False
        upper, lower = self.trigger_limits(model)
        u = model.util(self.dim)
        tol = EPS * np.maximum(1.0, np.abs(upper[np.isfinite(upper)]).max(initial=1.0))
        return bool((u > upper + tol).any() or (u < lower - tol).any())

    def slack(self, model: ClusterModel) -> float:
        # Noise: not worth a move. Never more than half the gap between the target band and the
        # trigger band (the same 0.005 at the default 1.10; 0.00225 at 1.045), so that a broker
        # left within slack of its target is still inside the threshold.
        share = min(MIN_GAIN_SHARE, 0.5 * (1.0 - BALANCE_MARGIN) * (self.threshold - 1.0))
        return share * model.cluster_util(self.dim)

    def min_gain(self, model: ClusterModel, excess: float) -> float:
        if excess < self.slack(model):
            return math.inf  # within noise of the target band: leave it
        return EPS * 1e-3

    def min_gain_array(self, model: ClusterModel, excess: np.ndarray) -> np.ndarray:
        return np.where(excess < self.slack(model), math.inf, EPS * 1e-3)

    def _band(self, model: ClusterModel, *, trigger: bool) -> tuple[np.ndarray, np.ndarray]:
        """Measured (noisy) loads: optimize to 1 +- margin x (threshold - 1) of the cluster's
        utilization; act only outside 1 +- (threshold - 1)."""
        n = model.n_brokers
        d = self.dim
        spread = (self.threshold - 1.0) * (1.0 if trigger else BALANCE_MARGIN)
        avg = model.cluster_util(d)
        # Where one partition alone, or the broker's rack, forces more than the threshold,
        # aim just above that bound instead (other racks still get the threshold)...
        biggest = self.per_replica(model, slice(None))
        part_bound = float(biggest.max() / model.cap[:, d].max()) if model.n_partitions else 0.0
        bound = np.maximum(part_bound, model.rack_floor(d))
        if trigger:
            # ...and count the goal as met within BOUND_TOLERANCE of that bound.
            upper = np.maximum(avg * (1.0 + spread), (1.0 + BOUND_TOLERANCE) * bound)
        else:
            # ...but never above today's hottest broker: the balance figure must not get worse.
            upper = np.maximum(avg * (1.0 + spread), np.minimum(1.01 * bound, model.util(d).max()))
        # An under-loaded broker does not make the balance figure (max / average) worse: act for
        # it only when it is twice as far under as the threshold allows over (0.80 at 1.10, e.g.
        # a new or restarted broker); once acting, fill it to the target band like the others.
        # A broker filled to within noise of 0.90 would otherwise trigger a plan on re-measuring.
        low = (2.0 if trigger else 1.0) * spread
        lower = np.full(n, avg * (1.0 - low) if self.lower else -np.inf)
        if self.lower and model.n_partitions and n > 1:
            # A partition heavier than the average broker pins that much on its broker(s) (RF of
            # them for replica-borne load): the others cannot all reach the cluster average. Their
            # lower limit follows what is left for them; otherwise the goal stays violated for
            # good and every replan moves a little more.
            big = int(np.argmax(biggest))
            k = 1 if self.leader_borne else int(model.rf[big])
            caps = np.sort(model.cap[:, d])[::-1]
            pinned = float(biggest[big]) * k
            if k < n and pinned / caps[:k].sum() > avg:
                rest = (model.load[:, d].sum() - pinned) / caps[k:].sum()
                lower = np.minimum(lower, rest * (1.0 - low))
        # A rack that cannot hold more (one replica per partition) is not pushed to.
        lower = np.minimum(lower, (1.0 - (BOUND_TOLERANCE if trigger else 0.01)) * model.rack_ceiling(d))
        lower[model.drained] = -np.inf  # a drained broker ends empty
        return upper, lower


class NetworkInDistributionGoal(NetworkInGoal, DistributionGoal):
    """Soft: network_in within the threshold of the cluster average, on both sides.

    An action is accepted if its destination_broker's network_in stays under the upper limit and
    its source_broker's over the lower one. Acts by replica moves and swaps (a leadership carries
    no network_in); a move that would push network_out past the threshold is not wanted (guard).
    A replica goes preferably where its bytes keep the destination's disk within the disk goal's
    target: the disk goal runs later and would otherwise move the same bytes again.
    """

    name = "network_in_distribution"
    resource = "network_in"
    guards = (OUT,)
    prefers_disk_room = True
    covers = True  # an under-loaded broker is lifted by the smallest replica that does it alone


class NetworkOutDistributionGoal(NetworkOutGoal, DistributionGoal):
    """Soft: network_out (leaders serve it) within the threshold of the cluster average, both sides.

    An action is accepted if its destination_broker's network_out stays under the upper limit and
    its source_broker's over the lower one. Leadership transfers first (no data), chains of two
    transfers, then replica moves and swaps.
    """

    name = "network_out_distribution"
    resource = "network_out"


class LeaderBytesInDistributionGoal(DistributionGoal):
    """Soft, all or nothing: leaders' bytes in under the threshold (no lower limit).

    An action is accepted if its destination_broker's leader bytes-in stays under the upper limit.
    Acts by leadership transfers and replica moves, no swaps. Its moves are kept only if they bring
    every broker within the band: it runs squeezed between every traffic limit, where a partial fix
    depends on which moves this window's noise happens to allow.
    """

    name = "leader_bytes_in_distribution"

    @classmethod
    def from_options(cls, options: PlannerOptions) -> Self:
        """Leader bytes-in follows the general balance threshold and is never idle."""
        return cls(options.balance_threshold)

    dim = LBIN
    lower = False
    leader_borne = True
    leadership = True
    swaps = False
    sheds_best_fit = True
    all_or_nothing = True

    def per_replica(self, model: ClusterModel, ps: np.ndarray | slice) -> np.ndarray:
        return model.bytes_in[ps]


class DiskDistributionGoal(DiskGoal, DistributionGoal):
    """Soft: disk under the threshold of the cluster average (no lower limit: filling a broker
    with data that carries no traffic costs bytes and relieves nothing).

    An action is accepted if its destination_broker's disk stays under the upper limit. Where one
    replica alone covers a broker's excess, the smallest such goes; otherwise the coldest data
    first (most bytes per unit of traffic). Idle below ``low_utilization``.
    """

    name = "disk_distribution"
    resource = "disk"
    lower = False
    # Every byte moved relieves one byte of disk: the smallest replica that finishes a broker
    # is the least data, where the biggest cold one would overshoot by up to its whole size.
    covers = True


class CountDistributionGoal(DistributionGoal):
    """Soft, all or nothing: a count per broker (exact, no measurement noise) within one integer
    band around the average, the same band for acting and for optimizing.

    An action is accepted if its destination_broker stays at or under the band's top and its
    source_broker at or over its bottom. Every whole unit counts as a gain. No swaps (a swap
    leaves counts as they are). Its moves are kept only if they bring every broker within the
    band, and none is made when ``out_of_reach`` shows they could not.
    """

    swaps = False
    all_or_nothing = True
    resource: str  # the options' name of the count (PlannerOptions.threshold)

    @classmethod
    def from_options(cls, options: PlannerOptions) -> Self:
        """This goal with its count's balance threshold (counts are never idle)."""
        return cls(options.threshold(cls.resource))

    # The dimensions one unit of the count carries along, whose other goals' limits cap how many
    # units a broker can give away or take.
    carries: tuple[int, ...] = ()

    def slack(self, model: ClusterModel) -> float:
        return EPS

    def min_gain(self, model: ClusterModel, excess: float) -> float:
        return 0.5  # counts: every whole replica/leadership counts

    def min_gain_array(self, model: ClusterModel, excess: np.ndarray) -> np.ndarray:
        return np.full(len(excess), 0.5)

    def move_key(
        self, model: ClusterModel, ps: np.ndarray, relief: np.ndarray, brokers: np.ndarray | int
    ) -> np.ndarray:
        key: np.ndarray = model.size[ps] + model.bytes_in[ps] * 1e-9  # cheapest data first
        return key

    def per_replica(self, model: ClusterModel, ps: np.ndarray | slice) -> np.ndarray:
        return np.ones(len(ps) if isinstance(ps, np.ndarray) else model.n_partitions)

    def _band(self, model: ClusterModel, *, trigger: bool) -> tuple[np.ndarray, np.ndarray]:
        n = model.n_brokers
        d = self.dim
        avg = model.load[:, d].sum() / int(model.live.sum() or n)
        upper = np.full(n, float(math.ceil(avg * self.threshold - 1e-9)))
        lower = np.full(n, float(math.floor(avg * (2 - self.threshold) + 1e-9)) if self.lower else -np.inf)
        lower[model.drained] = -np.inf  # a drained broker ends empty
        return upper, lower

    def out_of_reach(self, model: ClusterModel, optimized: Sequence[Goal]) -> bool:
        """In this goal's search a broker above the band only gives units away and one below only
        receives them: destinations must stay within the band, and the fill takes from brokers
        above the average. Each unit that leaves takes its load off the broker, and every optimized
        goal's lower limit there caps the load that can leave; so at most the k lightest fit.
        Likewise the upper limits cap what a broker below the band can receive. Fewer than the
        broker's distance to the band: all or nothing ends in nothing.
        """
        upper, lower = self.limits(model)
        count = model.load[:, self.dim]
        over = np.flatnonzero(count > upper + EPS)
        under = np.flatnonzero((count < lower - EPS) & model.dest_ok)
        if not len(over) and not len(under):
            return False
        limits = [
            (g.dim, *g.limits(model))
            for g in optimized
            if isinstance(g, ResourceGoal) and not (isinstance(g, DistributionGoal) and g.idle(model))
        ]
        leaders = self.leader_borne
        carried = self.carries
        for b in over.tolist():
            ps = model.partitions_on(b)
            ps = ps[model.movable[ps] & (model.rf[ps] > 1)] if leaders else ps[model.movable[ps]]
            if leaders:
                ps = ps[model.leader[ps] == b]
            need = math.ceil(count[b] - upper[b] - 1e-9)
            for dim, _, low in limits:
                if dim not in carried or not np.isfinite(low[b]):
                    continue
                room = model.load[b, dim] - (low[b] - EPS * max(1.0, abs(low[b]))) * model.cap[b, dim]
                if _lightest_within(_carried(model, ps, dim), room) < need:
                    return True
        for b in under.tolist():
            if leaders:
                ps = model.partitions_on(b)
                ps = ps[model.movable[ps] & (model.leader[ps] != b)]
            else:
                ps = np.flatnonzero(model.movable)
            need = math.ceil(lower[b] - count[b] - 1e-9)
            for dim, up, _ in limits:
                if dim not in carried or not np.isfinite(up[b]):
                    continue
                room = (up[b] + EPS * max(1.0, abs(up[b]))) * model.cap[b, dim] - model.load[b, dim]
                if _lightest_within(_carried(model, ps, dim), room) < need:
                    return True
        return False


def _carried(model: ClusterModel, ps: np.ndarray, dim: int) -> np.ndarray:
    """The load a replica (a leadership, for OUT and LBIN) of each of ``ps`` carries on ``dim``."""
    per_partition = {IN: model.bytes_in, DISK: model.size, OUT: model.leader_out, LBIN: model.bytes_in}[dim]
    carried: np.ndarray = per_partition[ps]
    return carried


class ReplicaCountDistributionGoal(CountDistributionGoal):
    """Soft, all or nothing: replicas per broker within an integer band around the average.

    An action is accepted if its destination_broker stays at or under the band's top and its
    source_broker at or over its bottom. Replica moves only, the smallest partitions first.
    """

    name = "replicas_distribution"
    resource = "replicas"
    dim = NREP
    carries = (IN, DISK)

    def _band(self, model: ClusterModel, *, trigger: bool) -> tuple[np.ndarray, np.ndarray]:
        upper, lower = super()._band(model, trigger=trigger)
        # With RF >= racks every rack holds a replica of each partition: a small rack's brokers
        # cannot get down to the cluster average (nor a big rack's up to it).
        upper = np.maximum(upper, np.ceil(model.rack_floor(self.dim) - 1e-9))
        lower = np.minimum(lower, np.floor(model.rack_ceiling(self.dim) + 1e-9))
        return upper, lower


class LeaderCountDistributionGoal(CountDistributionGoal):
    """Soft, all or nothing: leaderships per broker within an integer band around the average.

    An action is accepted if its destination_broker stays at or under the band's top and its
    source_broker at or over its bottom. Leadership transfers only, the least traffic first.
    """

    name = "leaders_distribution"
    resource = "leaders"
    dim = NLEAD
    carries = (OUT, LBIN)
    leader_borne = True
    leadership = True
    moves = False

    def leadership_key(self, model: ClusterModel, ps: np.ndarray) -> np.ndarray:
        key: np.ndarray = model.leader_out[ps]  # least traffic disturbed first
        return key


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
