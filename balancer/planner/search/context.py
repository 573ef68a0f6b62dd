"""The search context: what one resource goal's search works with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..actions import Move
from ..model import ClusterModel
from ..options import PlannerOptions
from .constants import DATA_SLACK, EPS

if TYPE_CHECKING:
    from ..goals import Goal, RackAwareGoal, ResourceGoal


@dataclass
class SearchContext:
    """What one resource goal's search works with, for one ``optimize``: the model, the goals that
    judge its moves, the limits that screen them, and the search's own state (``barren``,
    ``guard_ratio``), which no goal object keeps."""

    model: ClusterModel
    goal: ResourceGoal  # the goal searching
    optimized: tuple[Goal, ...]  # goals already optimized: each must accept every move
    checks: tuple[Goal, ...]  # ``optimized`` and the goal searching
    # Resource goals whose limits screen candidate moves: the optimized ones not idle (under its
    # low-utilization threshold a goal vetoes nothing) and the goal searching.
    res_goals: tuple[ResourceGoal, ...]
    rack: RackAwareGoal | None  # the rack goal, if optimized: destinations must keep racks
    options: PlannerOptions
    # Disk a take-back, or a move that prefers disk room, may leave on a broker: the disk goal's
    # target band (that goal runs later and would move the bytes again).
    disk_line: float
    # Swap partners that gave no exchange, by how many searches: passed over after BARREN_AFTER.
    barren: dict[int, int] = field(default_factory=dict)
    # Guard ceiling / cluster utilization while a figure-setting broker is shed again; None: the
    # goal's threshold.
    guard_ratio: float | None = None

    @property
    def data_first(self) -> bool:
        """The search sizes its per-move cost for data first (``search.cost``): the goal weighs
        moves and the disk goal has nothing to do (it will not act, or no broker's disk is above
        its target as the search starts). Where it has, the bytes a traffic move copies relieve
        disk as well, off a hot disk or onto a cold one (bytes the disk goal would move anyway),
        so the goal's ceiling cost and its few big moves stand, up to the disk excess of the shed
        broker (``shed.disk_hot_cost``) or of a fill's sources (``fill.fill_all``)."""
        return self.goal.weighs_moves and self.disk_idle

    @property
    def data_slack(self) -> float:
        """How much more data than the least a data-first shed or fill may copy for fewer moves:
        ``PlannerOptions.data_slack``, else DATA_SLACK."""
        slack = self.options.data_slack
        return DATA_SLACK if slack is None else slack

    @property
    def swap_data_cap(self) -> bool:
        """A traffic swap's data is capped (``PlannerOptions.swap_data_cap``; ``plan`` decides None)."""
        return bool(self.options.swap_data_cap)

    @property
    def fill_data_first(self) -> bool:
        """A traffic fill goes data first where the cost order would copy more than the data slack
        over it, though the disk goal has work (``PlannerOptions.fill_data_first``; ``plan`` decides
        None)."""
        return bool(self.options.fill_data_first)

    @property
    def fill_disk_excess(self) -> bool:
        """A traffic fill where the disk goal has work lifts a broker first off the brokers over the
        disk line, up to their excess (``PlannerOptions.fill_disk_excess``; ``plan`` decides None)."""
        return bool(self.options.fill_disk_excess)

    # ---- chains: several moves judged as one (search.eject, search.leadership.hand_off) ----
    def opens(self, move: Move) -> bool:
        """A chain's first move passes every check that is not a resource limit (racks, caps...):
        the receiver may go over its limits until the chain's later moves shed it."""
        model = self.model
        return (
            model.allowed(move)
            and model.within_caps(move)
            and all(g.accept(move, model) for g in self.checks if g not in self.res_goals)
        )

    def try_move(self, move: Move) -> bool:
        """``Goal.try_move(move, model, checks)``: apply ``move`` if the plan's caps allow it and every
        goal in ``checks`` accepts it (judged by ``Checks``, made at the first move)."""
        judge = self._judge
        if judge is None:
            judge = self._judge = Checks(self.checks, self.model)
        return judge.try_move(move)

    def metrics(self) -> list[float]:
        """Each checked goal's metric, the searching goal's last."""
        return [g.metric(self.model) for g in self.checks]

    def better(self, before: list[float]) -> bool:
        """Since ``before`` (``metrics``): the searching goal's metric fell and no other's rose."""
        after = self.metrics()
        return after[-1] < before[-1] - EPS * max(1.0, before[-1]) and all(
            x <= y + EPS * max(1.0, abs(y)) for x, y in zip(after[:-1], before[:-1], strict=True)
        )

    def dest_ceilings(self) -> dict[int, list[float]]:
        """Per dimension a resource goal limits, the most each broker may carry there: the least
        of those goals' ``load_ceiling`` (what ``screen.dest_mask`` compares loads with; a load
        within the least is within each), as Python floats. Limits are fixed for a model: made once."""
        if self._ceilings is None:
            per: dict[int, list[np.ndarray]] = {}
            for g in self.res_goals:
                per.setdefault(g.dim, []).append(g.load_ceiling(self.model))
            self._ceilings = {d: np.minimum.reduce(cs).tolist() for d, cs in per.items()}
        return self._ceilings

    _ceilings: dict[int, list[float]] | None = field(default=None, init=False, repr=False)
    _judge: Checks | None = field(default=None, init=False, repr=False)

    # The disk goal has nothing to do as this search starts (see ``data_first``).
    disk_idle: bool = False
    # The model's log as the search starts: the moves it made are ``model.log[start:]``.
    start: int = 0


class Checks:
    """``Goal.try_move`` over ``goals`` on ``model``, the goals whose ``accept`` is per-broker bounds on
    one dimension (``Goal.bounds``) judged together: per dimension, the least of their ceilings on
    the broker that gains load and the greatest of their floors on the one that loses it. Each of
    those goals compares the same figure, (load +- change) / capacity, with its own bound, so a move
    within the least ceiling and the greatest floor is within each: the same verdicts, a few
    comparisons a move instead of a call per goal. Made for one search or one pruning, while the
    goals keep the limits they have for the model."""

    def __init__(self, goals: tuple[Goal, ...], model: ClusterModel) -> None:
        self.model = model
        self.others: list[Goal] = []  # asked move by move
        folded: dict[int, tuple[list[float], list[float]]] = {}
        for goal in goals:
            bounds = goal.bounds(model)
            if bounds is None:
                self.others.append(goal)
                continue
            dim, ceiling, floor = bounds
            if dim in folded:
                least, most = folded[dim]
                ceiling = [min(x, y) for x, y in zip(least, ceiling, strict=True)]
                floor = [max(x, y) for x, y in zip(most, floor, strict=True)]
            folded[dim] = (ceiling, floor)
        self.dims = [
            (dim, ceiling, floor, model.cap[:, dim].tolist()) for dim, (ceiling, floor) in folded.items()
        ]

    def accept(self, move: Move) -> bool:
        model = self.model
        change, load = model.delta_items(move), model.load
        for dim, ceiling, floor, cap in self.dims:
            d = change[dim]
            if d == 0:
                continue
            gain, lose = (move.dst, move.src) if d > 0 else (move.src, move.dst)
            d = abs(d)
            if not (
                (load.item(gain, dim) + d) / cap[gain] <= ceiling[gain]
                and (load.item(lose, dim) - d) / cap[lose] >= floor[lose]
            ):
                return False
        return all(goal.accept(move, model) for goal in self.others)

    def try_move(self, move: Move) -> bool:
        model = self.model
        if not self.accept(move) or not model.allowed(move) or not model.within_caps(move):
            return False
        model.apply(move)
        return True
