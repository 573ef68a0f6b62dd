"""Soft distribution goals: a resource or count within a band around the cluster average."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Self

import numpy as np

from ..actions import Move
from ..model import DISK, IN, LBIN, NLEAD, NREP, OUT, ClusterModel
from ..options import PlannerOptions
from ..search.constants import EPS
from ..search.leadership import balance_leader_counts
from .base import Goal
from .resource import (
    BALANCE_MARGIN,
    BOUND_TOLERANCE,
    MIN_GAIN_SHARE,
    TARGET_OVER_BOUND,
    DiskGoal,
    NetworkInGoal,
    NetworkOutGoal,
    ResourceGoal,
    trigger_tolerance,
)


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
        held = self.held(model, optimized_goals)
        if self.out_of_reach(model, held):
            return  # every move it made would be undone: none is made
        super().optimize(model, held, options)

    @staticmethod
    def held(model: ClusterModel, optimized_goals: Sequence[Goal]) -> tuple[Goal, ...]:
        """The goals squeezed between the traffic limits (all or nothing) keep their moves a noise
        margin clear of those limits: a fix that fits only by a hair would otherwise be out of reach
        in one window and, with a few % of re-measured rates, within reach in the next (and move
        data for noise). ``optimized_goals`` with each traffic goal held that clear."""
        return tuple(
            g.held_clear(g.slack(model)) if isinstance(g, DistributionGoal) and not g.all_or_nothing else g
            for g in optimized_goals
        )

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
        memo = self._idle_memo
        if memo is None or memo[0] != id(model):
            # Moves leave the cluster's total load as it is: decided once per model.
            idle = self.low_utilization > 0 and model.cluster_util(self.dim) < self.low_utilization
            memo = self._idle_memo = (id(model), idle)
        return memo[1]

    def accept(self, move: Move, model: ClusterModel) -> bool:
        memo = self._idle_memo  # ``idle``'s, read here without the call: asked per move
        idle = memo[1] if memo is not None and memo[0] == id(model) else self.idle(model)
        return idle or super().accept(move, model)

    def bounds(self, model: ClusterModel) -> tuple[int, list[float], list[float]] | None:
        return None if self.idle(model) else super().bounds(model)

    def accepts(self, model: ClusterModel, d: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        if self.idle(model):
            return np.ones(len(d), dtype=bool)
        return super().accepts(model, d, src, dst)

    def violated(self, model: ClusterModel) -> bool:
        if self.idle(model):
            return False
        upper, lower = self.trigger_limits(model)
        under = model.util(self.dim) < lower - trigger_tolerance(upper)
        return self.over_trigger(model) or bool(under.any())

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
        # Where one partition alone, the broker's rack (its floor), or racks that cannot hold
        # their share (the level they leave the others) force more than the threshold, aim just
        # above that bound instead (racks under neither still get the threshold)...
        biggest = self.per_replica(model, slice(None))
        part_bound = float(biggest.max() / model.cap[:, d].max()) if model.n_partitions else 0.0
        bound = np.maximum(np.maximum(part_bound, model.rack_level(d)), model.rack_floor(d))
        if trigger:
            # ...and count the goal as met within BOUND_TOLERANCE of that bound.
            upper = np.maximum(avg * (1.0 + spread), (1.0 + BOUND_TOLERANCE) * bound)
        else:
            # ...but never above today's hottest broker: the balance figure must not get worse.
            upper = np.maximum(
                avg * (1.0 + spread), np.minimum(TARGET_OVER_BOUND * bound, model.util(d).max())
            )
        # An under-loaded broker does not make the balance figure (max / average) worse: act for
        # it only when it is twice as far under as the threshold allows over (0.80 at 1.10, e.g.
        # a new or restarted broker); once acting, fill it to the target band like the others.
        # A broker filled to within noise of 0.90 would otherwise trigger a plan on re-measuring.
        low = (2.0 if trigger else 1.0) * spread
        lower = np.full(n, avg * (1.0 - low) if self.lower else -np.inf)
        if self.lower and model.n_partitions and n > 1:
            # Partitions heavier than the average broker pin that much on their brokers: the
            # others cannot all reach the cluster average. Their lower limit follows what is left
            # for them (``reachable_floor``); otherwise the goal stays violated for good, copies
            # data for a level no placement reaches, and every replan moves a little more.
            lower = np.minimum(lower, self.reachable_floor(model, biggest) * (1.0 - low))
        # A rack that cannot hold more (one replica per partition) is not pushed to.
        lower = np.minimum(lower, (1.0 - (BOUND_TOLERANCE if trigger else 0.01)) * model.rack_ceiling(d))
        lower[model.drained] = -np.inf  # a drained broker ends empty
        return upper, lower

    def reachable_floor(self, model: ClusterModel, carried: np.ndarray) -> float:
        """The highest utilization every live broker can hold at once, whatever the plan, given what
        one replica of each partition carries (``carried``; a leader's alone where leader-borne).

        The k heaviest replicas sit on at most k brokers, so the brokers holding none of them (at
        least the capacity of all but the k biggest) share at most the load those k leave: the
        floor is at most min over k of (load - the k heaviest) / (capacity - the k biggest
        capacities). Only a few giants make it bind; otherwise it is above the cluster average.
        """
        d = self.dim
        caps = np.sort(model.cap[model.live, d] if model.live.any() else model.cap[:, d])[::-1]
        n = len(caps)
        if n < 2 or not len(carried):
            return math.inf
        # The n - 1 heaviest replicas come from the n - 1 heaviest partitions.
        top = min(n - 1, len(carried))
        ps = np.argpartition(-carried, top - 1)[:top]
        copies = np.ones(top, dtype=np.int64) if self.leader_borne else model.rf[ps].astype(np.int64)
        heavy = np.sort(np.repeat(carried[ps], copies))[::-1][: n - 1]
        k = len(heavy)
        left = float(model.load[:, d].sum()) - np.cumsum(heavy)
        room = float(caps.sum()) - np.cumsum(caps[:k])
        levels = np.divide(left, room, out=np.full(k, math.inf), where=room > 0)
        return float(levels.min())


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
    # A few partitions may carry most of the traffic: two of them on a small broker may fit nowhere
    # else, by a move or a swap, until a bigger broker takes one and passes lighter replicas on.
    ejects = True


class NetworkOutDistributionGoal(NetworkOutGoal, DistributionGoal):
    """Soft: network_out (leaders serve it) within the threshold of the cluster average, both sides.

    An action is accepted if its destination_broker's network_out stays under the upper limit and
    its source_broker's over the lower one. Leadership transfers first (no data), chains of two
    transfers, a heavy leadership handed to a follower that passes light ones on (the hottest
    broker only), then replica moves and swaps. Where that copies data, the search runs again
    after every leadership is assigned at once (a linear program, ``assigns_leaderships``) and
    the run that copies less is kept, provided it leaves the goal no worse.
    """

    name = "network_out_distribution"
    resource = "network_out"
    hands_off = True
    assigns_leaderships = True


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

    weighs_moves = False  # one unit per move: ordered by data alone

    def move_key(
        self,
        model: ClusterModel,
        ps: np.ndarray,
        relief: np.ndarray,
        brokers: np.ndarray | int,
        *,
        overhead: float | None = None,
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
            (g.dim, *g.limits(model)) for g in optimized if isinstance(g, ResourceGoal) and not g.idle(model)
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
        forced = np.maximum(model.rack_floor(self.dim), model.rack_level(self.dim))
        upper = np.maximum(upper, np.ceil(forced - 1e-9))
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

    def optimize(self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions) -> None:
        """Transfers one at a time first; where the counts are still outside the band, the band is
        reached at once or not at all (``balance_leader_counts``)."""
        super().optimize(model, optimized_goals, options)
        if self.violated(model):
            held = [
                g
                for g in self.held(model, optimized_goals)
                if isinstance(g, ResourceGoal) and g.dim in self.carries and not g.idle(model)
            ]
            balance_leader_counts(model, self, held)


def _lightest_within(loads: np.ndarray, room: float) -> int:
    """How many of ``loads`` fit, together, within ``room``: the lightest first."""
    if room < 0:
        return 0
    return int(np.searchsorted(np.cumsum(np.sort(loads)), room, side="right"))
