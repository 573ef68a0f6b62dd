"""Resource goals: each keeps one resource's utilization per broker within limits.

``ResourceGoal`` holds the hooks the shared search (``balancer.planner.search``) reads; the resource
goals (network in and out, disk) state what a replica carries and the order it is moved in; the
capacity goals put a hard ceiling on each.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Self

import numpy as np

from balancer.vocabulary import SOFT_GOALS

from ..actions import Move
from ..model import DISK, IN, OUT, ClusterModel
from ..options import PlannerOptions
from ..search import SearchContext
from ..search import optimize as search
from ..search.constants import EPS
from .base import Goal
from .hard import RackAwareGoal

# Hysteresis (Cruise Control's balance margin and violation threshold): a distribution goal acts
# only when a broker is outside balance_threshold (or more than BOUND_TOLERANCE above the bound
# where the bound is higher), and then optimizes to the tighter band 1 +- BALANCE_MARGIN x
# (threshold - 1). A freshly balanced cluster thus sits ~1% inside the band that triggers a plan,
# and re-measuring it with a few % noise per partition does not trigger another one.
BALANCE_MARGIN = 0.9
BOUND_TOLERANCE = 0.02
# Where the bound binds, the goals optimize to this multiple of it (within BOUND_TOLERANCE counts as met).
TARGET_OVER_BOUND = 1.01
# Minimum excess: a traffic/disk distribution goal moves nothing for a pair of brokers whose
# combined distance outside the target band is below MIN_GAIN_SHARE of the cluster's average
# utilization (measurement noise), e.g. a leadership handed over to lift a broker from 0.908 to the
# 0.91 target. Above that, any move that cuts the excess counts, however small: with ~4,900
# replicas per broker (270 brokers, 1.3M replicas) one replica carries ~0.02% of a broker's load, so a
# minimum gain per move (say 0.5% of the average) would reject nearly every single move there and
# leave network_out far above its target.
MIN_GAIN_SHARE = 0.005
# The most a replica move is charged when ranking by relief per byte (data + cost x moves), as a
# multiple of the model's move_overhead (half the mean partition size): fewer, bigger moves disturb
# later goals less and spare operators a long tail of small moves. It is a ceiling: each shed and
# fill charges the largest cost that keeps its data within DATA_SLACK of the least (search.cost),
# since where a mean partition is far bigger than a typical one the full cost ranks big partitions
# of poor relief per byte first. Above it, replanning an executed plan starts to move replicas
# again (the demo cluster's stability test).
MOVE_OVERHEAD_SCALE = 4.0


def trigger_tolerance(upper: np.ndarray) -> float:
    """How far over a trigger band's upper limits a utilization may be and still count as within
    it: EPS of the largest finite limit (at least 1)."""
    return float(EPS * np.maximum(1.0, np.abs(upper[np.isfinite(upper)]).max(initial=1.0)))


# A goal's upper and lower limits and its dimension's capacities, per broker, as Python floats.
Scalars = tuple[list[float], list[float], list[float]]


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
    * ``assigns_leaderships``: leaderships first reassigned as a whole (a linear program);
    * ``sheds_best_fit`` / ``covers`` / ``chains_leadership`` / ``hands_off`` / ``ejects`` /
      ``swaps_least_data``: how a broker over its limit is shed;
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
    # A figure-setting broker may hand a heavy leadership to a follower without room, which sheds
    # lighter ones on (search.leadership.hand_off_heavy).
    hands_off = False
    # Before shedding, leaderships are assigned as a whole by a linear program over every movable
    # partition's replicas (search.leadership.assign_leaderships): a leader-borne resource only.
    assigns_leaderships = False
    # A figure-setting broker that moves and swaps leave over the limit may move one heavy replica
    # to a receiver after lighter ones left the receiver to make room (search.eject).
    ejects = False
    # Swaps put data first (search.swap): an exchange copies at most the data slack over the least
    # data its net relief takes, and the lightest replica on the partner that passes goes (the
    # least data, the most relief for the offer) rather than the one that leaves both brokers level.
    swaps_least_data = False
    # A disk limit above the disk goal's line (the capacity ceiling): replicas that alone copy more
    # than the data slack over the least data for the broker's whole excess over that line are
    # shed last (search.shed).
    defers_giants = False
    refills = False  # a shed a floor binds goes on by pairs (search.refill)

    def __init__(self) -> None:
        # For the model whose id is first: its limits (upper, lower), and the same limits with the
        # dimension's capacities as lists of Python floats (``scalar_limits``).
        self._cache: tuple[int, np.ndarray, np.ndarray, Scalars] | None = None
        self._trigger_cache: tuple[int, np.ndarray, np.ndarray] | None = None
        self._ceiling: tuple[np.ndarray, np.ndarray] | None = None
        self._idle_memo: tuple[int, bool] | None = None

    def compute_limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def idle(self, model: ClusterModel) -> bool:
        """The goal neither acts nor vetoes other goals' moves on this model (see DistributionGoal)."""
        return False

    def reset(self) -> None:
        self._cache = None
        self._trigger_cache = None
        self._ceiling = None
        self._idle_memo = None

    def _limits_of(self, model: ClusterModel) -> tuple[int, np.ndarray, np.ndarray, Scalars]:
        # Totals per dimension never change under moves, so limits are fixed for a model.
        cache = self._cache
        if cache is None or cache[0] != id(model):
            upper, lower = self.compute_limits(model)
            scalars = (upper.tolist(), lower.tolist(), model.cap[:, self.dim].tolist())
            cache = self._cache = (id(model), upper, lower, scalars)
        return cache

    def limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        _, upper, lower, _ = self._limits_of(model)
        return upper, lower

    def scalar_limits(self, model: ClusterModel) -> Scalars:
        """``limits`` and the dimension's capacities as lists of Python floats: the same IEEE values as
        numpy's, read per move at a fraction of the cost of ``ndarray.item`` (the per-move checks)."""
        cache = self._cache
        if cache is not None and cache[0] == id(model):  # ``_limits_of``'s check, asked per move
            return cache[3]
        return self._limits_of(model)[3]

    def load_ceiling(self, model: ClusterModel) -> np.ndarray:
        """Per broker, the most it may carry on this goal's dimension: ``(upper + EPS) * cap``
        (what the vectorized destination screens compare loads with), kept with the limits."""
        upper, _ = self.limits(model)
        if self._ceiling is None or self._ceiling[0] is not upper:
            self._ceiling = (upper, (upper + EPS) * model.cap[:, self.dim])
        return self._ceiling[1]

    def trigger_limits(self, model: ClusterModel) -> tuple[np.ndarray, np.ndarray]:
        """The band whose violation makes this goal act: its limits, unless a goal optimizes to a
        narrower band than the one that triggers it."""
        return self.limits(model)

    def over_trigger(self, model: ClusterModel) -> bool:
        """Some broker is over the upper limit of the band that triggers this goal."""
        upper, _ = self.trigger_limits(model)
        return bool((model.util(self.dim) > upper + trigger_tolerance(upper)).any())

    def metric(self, model: ClusterModel) -> float:
        upper, lower = self.limits(model)
        u = model.util(self.dim)
        return float(np.maximum(u - upper, 0).sum() + np.maximum(lower - u, 0).sum())

    def term(self, model: ClusterModel, b: int, load: float) -> float:
        """Broker ``b``'s distance outside this goal's limits if it carried ``load``."""
        upper, lower, cap = self.scalar_limits(model)
        # Python floats: the same IEEE arithmetic as numpy's scalars, at a fraction of the cost per
        # call (this and ``accept`` run for every move the search tries).
        return float(_outside(load / cap[b], upper[b], lower[b]))

    margin = 0.0  # utilization a move must keep clear of the limits (see held_clear)

    def held_clear(self, margin: float) -> Self:
        """This goal as a check that accepts a move only if it keeps ``margin`` of utilization clear of
        the limits: a copy, so that the goal itself is left as it is."""
        held = copy.copy(self)
        held.margin = margin
        return held

    def accept(self, move: Move, model: ClusterModel) -> bool:
        dim = self.dim
        d = model.delta_items(move)[dim]
        if d == 0:
            return True
        cache = self._cache  # ``scalar_limits``, read without the call: asked per move and goal
        upper, lower, cap = (
            cache[3] if cache is not None and cache[0] == id(model) else self.scalar_limits(model)
        )
        gain, lose = (move.dst, move.src) if d > 0 else (move.src, move.dst)
        d = abs(d)
        load = model.load
        top = upper[gain]
        tol = EPS * max(1.0, abs(top)) - self.margin
        gained: float = (load.item(gain, dim) + d) / cap[gain]
        kept: float = (load.item(lose, dim) - d) / cap[lose]
        return gained <= top + tol and kept >= lower[lose] - tol  # Python floats: bools already

    def bounds(self, model: ClusterModel) -> tuple[int, list[float], list[float]] | None:
        # ``accept``'s tolerance is taken at the broker that gains load: a bound on the one that
        # loses it only where that tolerance is the same at every broker. None before the limits
        # for ``model`` are computed (they would be computed now, not when ``accept`` first asks),
        # and where a limit is NaN (no order).
        cache = self._cache
        if cache is None or cache[0] != id(model):
            return None
        upper, lower, _ = cache[3]
        if any(math.isnan(x) for x in upper + lower):
            return None
        tols = [EPS * max(1.0, abs(top)) - self.margin for top in upper]  # ``accept``'s arithmetic
        if len(set(tols)) > 1:
            return None
        tol = tols[0] if tols else 0.0
        return self.dim, [top + t for top, t in zip(upper, tols, strict=True)], [low - tol for low in lower]

    def accepts(self, model: ClusterModel, d: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """``accept`` for many moves at once, each from the model as it is: move i takes ``d[i]`` of
        this goal's resource from broker ``src[i]`` to ``dst[i]`` (negative: the other way)."""
        upper, lower = self.limits(model)
        up = d > 0
        gain, lose = np.where(up, dst, src), np.where(up, src, dst)
        d = np.abs(d)
        cap = model.cap[:, self.dim]
        load = model.load[:, self.dim]
        tol = EPS * np.maximum(1.0, np.abs(upper[gain])) - self.margin
        ok: np.ndarray = ((load[gain] + d) / cap[gain] <= upper[gain] + tol) & (
            (load[lose] - d) / cap[lose] >= lower[lose] - tol
        )
        accepted: np.ndarray = ok | (d == 0)
        return accepted

    def improves(self, move: Move, model: ClusterModel) -> bool:
        d = model.delta_items(move)[self.dim]
        if d == 0:
            return False
        s, t = move.src, move.dst
        ls, lt = model.load.item(s, self.dim), model.load.item(t, self.dim)
        # ``term`` of both brokers before and after, the limits read once.
        upper, lower, cap = self.scalar_limits(model)
        up_s, lo_s, cap_s, up_t, lo_t, cap_t = upper[s], lower[s], cap[s], upper[t], lower[t], cap[t]
        before = _outside(ls / cap_s, up_s, lo_s) + _outside(lt / cap_t, up_t, lo_t)
        after = _outside((ls - d) / cap_s, up_s, lo_s) + _outside((lt + d) / cap_t, up_t, lo_t)
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
        return self.improves(move, model) and self.keeps_guards(move, model, guard_ratio)

    def guard_band(self, model: ClusterModel, dim: int) -> float:
        """The top of the band a guarded dimension is optimized to later (its utilization): what a
        move may leave there without making work for that goal."""
        return (1.0 + BALANCE_MARGIN * (self.threshold - 1.0)) * model.cluster_util(dim)

    def keeps_guards(self, move: Move, model: ClusterModel, guard_ratio: float | None) -> bool:
        """``move`` pushes no broker past the guard ceiling on a guarded dimension (see ``wants``)."""
        if not self.guards:
            return True
        vec = model.delta_items(move)
        for g in self.guards:
            v = vec[g]
            if v == 0:
                continue
            gain = move.dst if v > 0 else move.src
            ratio = guard_ratio if guard_ratio is not None else self.threshold
            if (model.load.item(gain, g) + abs(v)) / model.cap.item(gain, g) > ratio * model.cluster_util(
                g
            ) + EPS:
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
        self,
        model: ClusterModel,
        ps: np.ndarray,
        relief: np.ndarray,
        brokers: np.ndarray | int,
        *,
        overhead: float | None = None,
    ) -> np.ndarray:
        """Sort key (ascending = tried first) for moving ``ps``' replicas off ``brokers``: the most
        relief per byte moved first, a fixed cost per move counted as bytes (``overhead``; by
        default the most a move is charged, ``move_overhead_ceiling``)."""
        if overhead is None:
            overhead = self.move_overhead_ceiling(model)
        return -_bucketed(relief / (model.size[ps] + overhead), relief)

    # The search charges a per-move cost (``move_key``'s overhead) sized per shed so that its data
    # stays within DATA_SLACK of the least (search.cost); False where the order ignores it.
    weighs_moves = True

    def move_overhead_ceiling(self, model: ClusterModel) -> float:
        """The most one replica move is charged, in bytes, when ranking candidates."""
        return MOVE_OVERHEAD_SCALE * model.move_overhead

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
        res_goals = tuple(g for g in optimized if isinstance(g, ResourceGoal) and not g.idle(model)) + (self,)
        line = disk_line(model, options)
        return SearchContext(
            model=model,
            goal=self,
            optimized=optimized,
            checks=optimized + (self,),
            res_goals=res_goals,
            rack=next((g for g in optimized if isinstance(g, RackAwareGoal)), None),
            options=options,
            disk_line=line,
            disk_idle=not np.isfinite(line) or bool((model.load[:, DISK] <= line * model.cap[:, DISK]).all()),
            start=len(model.log),
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
        upper, _, cap = self.scalar_limits(model)
        return bool(model.load.item(b, self.dim) / cap[b] > upper[b] + self.slack(model))

    def fits(self, move: Move, model: ClusterModel) -> bool:
        """The receiving broker stays within this goal's upper limit."""
        upper, _, cap = self.scalar_limits(model)
        d = model.delta_items(move)[self.dim]
        b = move.dst if d > 0 else move.src
        return bool((model.load.item(b, self.dim) + abs(d)) / cap[b] <= upper[b] + EPS)

    def under(self, model: ClusterModel, b: int) -> bool:
        """Broker ``b`` is below its lower limit by more than the slack: the search fills it."""
        _, lower, cap = self.scalar_limits(model)
        return bool(model.load.item(b, self.dim) / cap[b] < lower[b] - self.slack(model))


def disk_line(model: ClusterModel, options: PlannerOptions) -> float:
    """The disk a take-back, or a move that prefers disk room, may leave on a broker: the disk
    goal's target band where that goal will act (it runs later and would move the bytes again);
    no line (inf) where it will not (not run, or idle under its low-utilization threshold), so
    that disk steers no destination for nothing."""
    names = options.goals if options.goals is not None else SOFT_GOALS
    util = model.cluster_util(DISK)
    if "disk_distribution" not in names or util < options.low_utilization_of("disk"):
        return float("inf")
    return util * (1.0 + BALANCE_MARGIN * (options.disk_threshold - 1.0))


def _outside(u: float, upper: float, lower: float) -> float:
    """How far utilization ``u`` lies outside [lower, upper] (``ResourceGoal.term``). Each side is
    ``max(x, 0.0)`` written out (x unless it is below 0.0, as ``max`` picks): asked for both brokers
    of every move the search tries, where a builtin call costs more than the comparison."""
    above, below = u - upper, lower - u
    return (0.0 if above < 0.0 else above) + (0.0 if below < 0.0 else below)


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
        self,
        model: ClusterModel,
        ps: np.ndarray,
        relief: np.ndarray,
        brokers: np.ndarray | int,
        *,
        overhead: float | None = None,
    ) -> np.ndarray:
        # Followers first within a bucket: moving a leader replica drags its network_out along.
        key: np.ndarray = super().move_key(model, ps, relief, brokers, overhead=overhead)
        key += 0.5 * (model.leader[ps] == brokers)
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
    weighs_moves = False  # every byte moved relieves a byte: ordered by coldness alone
    # Disk has partitions far bigger than the rest (retention x traffic): two giants on one broker
    # may fit nowhere else until a receiver is emptied for one of them.
    ejects = True
    # A swap copies both replicas' bytes for a net relief of their difference: aimed at leaving
    # both brokers level, an exchange of near equals copies many times the bytes it relieves.
    swaps_least_data = True
    # Every replica carries network_in: shedding cold bytes takes a broker down to the traffic
    # goal's floor, where no replica may leave until a lighter, hotter one arrives (search.refill).
    refills = True

    def per_replica(self, model: ClusterModel, ps: np.ndarray | slice) -> np.ndarray:
        return model.size[ps]

    def move_key(
        self,
        model: ClusterModel,
        ps: np.ndarray,
        relief: np.ndarray,
        brokers: np.ndarray | int,
        *,
        overhead: float | None = None,
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
    defers_giants = True
