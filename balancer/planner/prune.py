"""Pruning: the moves a plan's end state does not need, undone.

The goals run in priority order and each keeps what the ones before it did; a replica an early
goal moved off a broker may have been made needless by the moves of a later goal (the broker got
relief elsewhere, the receiver got too much). Only the end state matters to the operator, who pays
for every byte and every move of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .actions import Move
from .goals.base import Goal
from .goals.resource import ResourceGoal
from .model import ClusterModel
from .search.constants import EPS, LEADERSHIP, REPLICA_MOVE
from .search.context import Checks

PRUNE_PASSES = 3  # a return frees room on the broker the replica leaves: the next pass may use it
# Pairs tried at the most (each a few goal checks): a plan of 50,000 moves has pairs by the
# thousand between two busy brokers, and a pair's return saves no more than its two moves.
PAIR_TRIES = 4096


def undo_needless(model: ClusterModel, goals: Sequence[Goal]) -> None:
    """Put back each replica the plan moved, the biggest first, where every goal accepts its return
    (each keeps both brokers within its limits, so no goal's figure gets worse and a replan finds no
    work); then pairs that went opposite ways between two brokers, together (``return_pairs``), and
    the single returns those make room for; then each leadership, where its first leader still
    holds the partition."""
    checks = Checks(tuple(goals), model)
    # Only returns move replicas from here on, and each step reports the partitions it moved:
    # ``after_returns`` brings the list of moved partitions up to date without a scan of the plan.
    moved = returns(model, goals, checks, moved_partitions(model))
    paired = return_pairs(model, goals, moved)
    if paired:
        returns(model, goals, checks, after_returns(model, moved, paired))
    touched = np.fromiter(model.touched, dtype=np.int64, count=len(model.touched))
    led = touched[model.leader[touched] != model.orig_leader[touched]]
    for p in led.tolist():
        a = int(model.orig_leader[p])
        if model.holds(p, a):
            checks.try_move(Move(LEADERSHIP, p, int(model.leader[p]), a))


def returns(
    model: ClusterModel,
    goals: Sequence[Goal],
    checks: Checks,
    moved: list[tuple[int, list[int], list[int]]],
) -> list[tuple[int, list[int], list[int]]]:
    """``return_replicas`` until a pass returns nothing, PRUNE_PASSES at the most (``checks``: the
    goals' judge of each return), over ``moved`` (``moved_partitions`` of the model as it is). The
    partitions the plan still moves, as ``moved_partitions`` would give them after the returns."""
    refused = Refusals()
    for _ in range(PRUNE_PASSES):
        back = return_replicas(model, goals, checks, refused, moved)
        if not back:
            break
        moved = after_returns(model, moved, back)
    return moved


class Refusals:
    """The returns refused so far, and when each broker and partition last changed.

    A return moves a replica's whole load, all of it non-negative, from the broker it reached back
    to one it left, and no cap refuses it (it only lowers the plan's bytes and each broker's move
    count). A goal refuses it for its partition's placement, or because the broker it returns to
    would carry too much or the one it leaves too little (``Goal.accept``): a refused return stays
    refused until its partition has changed, its destination has lost load or its source gained
    some. A later try of one that is still refused is skipped.
    """

    def __init__(self) -> None:
        self.clock = 0  # returns made so far
        self.lost_at: dict[int, int] = {}  # broker -> the clock when a return last left it
        self.gained_at: dict[int, int] = {}  # broker -> the clock when a return last reached it
        self.partition_at: dict[int, int] = {}  # partition -> the clock when a replica of it last returned
        self.refused_at: dict[tuple[int, int, int], int] = {}  # (p, src, dst) -> the clock when refused

    def settled(self, p: int, src: int, dst: int) -> bool:
        """Refused before, and nothing that could let it through has happened since."""
        at = self.refused_at.get((p, src, dst))
        return (
            at is not None
            and self.partition_at.get(p, 0) <= at
            and self.gained_at.get(src, 0) <= at
            and self.lost_at.get(dst, 0) <= at
        )

    def refuse(self, p: int, src: int, dst: int) -> None:
        self.refused_at[(p, src, dst)] = self.clock

    def screen(
        self, model: ClusterModel, goals: Sequence[Goal], tries: Sequence[tuple[int, int, int]]
    ) -> None:
        """Refuse now each of ``tries`` (p, src, dst: p's replica on src returning to dst) that a
        resource goal refuses as the model is: all at once, where one ``accept`` at a time is
        the cost of a pass."""
        if not tries:
            return
        p, src, dst = (np.array(column, dtype=np.int64) for column in zip(*tries, strict=True))
        delta = model.contrib_matrix(p, src)
        ok = np.ones(len(p), dtype=bool)
        for goal in goals:
            if isinstance(goal, ResourceGoal):
                ok &= goal.accepts(model, delta[:, goal.dim], src, dst)
        for i in np.flatnonzero(~ok).tolist():
            self.refused_at[tries[i]] = self.clock

    def returned(self, p: int, src: int, dst: int) -> None:
        self.clock += 1
        self.partition_at[p] = self.lost_at[src] = self.gained_at[dst] = self.clock


def return_replicas(
    model: ClusterModel,
    goals: Sequence[Goal],
    checks: Checks,
    refused: Refusals,
    moved: list[tuple[int, list[int], list[int]]],
) -> set[int]:
    """One pass of returns over the partitions the plan moves (``moved``, as ``moved_partitions``
    gives them: the biggest first), but those ``refused`` knows to be refused still, each judged by
    ``checks``. The partitions of which a replica returned."""
    returned: set[int] = set()
    refused.screen(model, goals, [(p, c, a) for p, left, reached in moved for c in reached for a in left])
    for p, left, reached in moved:
        for c in reached:
            for a in left:
                # ``moved`` is p's placement as this pass found it: a broker p left holds it again
                # only after a return of p's in this pass.
                if (p in returned and model.holds(p, a)) or refused.settled(p, c, a):
                    continue
                if checks.try_move(Move(REPLICA_MOVE, p, c, a)):
                    refused.returned(p, c, a)
                    returned.add(p)
                    break
                refused.refuse(p, c, a)
    return returned


def return_pairs(
    model: ClusterModel, goals: Sequence[Goal], moved: list[tuple[int, list[int], list[int]]]
) -> set[int]:
    """Two replicas the plan moved opposite ways between the same two brokers (a swap, or two moves)
    go back together where every goal takes the pair (``pair_ok``): each alone may unbalance what
    both together do not. The biggest first, from ``moved`` (``moved_partitions`` of the model as it
    is). The partitions of which a replica returned."""
    ways: dict[tuple[int, int], list[int]] = {}
    for p, left, reached in moved:
        if len(left) == 1 and len(reached) == 1:
            ways.setdefault((left[0], reached[0]), []).append(p)
    resource = [g for g in goals if isinstance(g, ResourceGoal) and not g.idle(model)]
    structural = [g for g in goals if not isinstance(g, ResourceGoal)]
    returned: set[int] = set()
    tries = 0
    for (a, c), ps in ways.items():
        qs = ways.get((c, a), [])
        if a > c or not qs:
            continue
        for p in ps:
            for q in qs:
                if not model.holds(q, a) or model.holds(q, c):
                    continue  # returned with another p already
                if tries >= PAIR_TRIES:
                    return returned
                tries += 1
                if pair_ok(
                    Move(REPLICA_MOVE, p, c, a), Move(REPLICA_MOVE, q, a, c), model, resource, structural
                ):
                    returned.update((p, q))
                    break
    return returned


def moved_partitions(model: ClusterModel) -> list[tuple[int, list[int], list[int]]]:
    """(partition, the brokers it left, the brokers it reached) for each partition the plan moves,
    the biggest first."""
    touched = np.fromiter(model.touched, dtype=np.int64, count=len(model.touched))
    moved = touched[(model.replicas[touched] != model.orig_replicas[touched]).any(axis=1)]
    moved = moved[np.argsort(-model.size[moved], kind="stable")]
    out = []
    # The rows as Python lists at once: a plan may move tens of thousands of partitions.
    for p, old, new in zip(
        moved.tolist(), model.orig_replicas[moved].tolist(), model.replicas[moved].tolist()
    ):
        out.extend(_moved(p, old, new))
    return out


def after_returns(
    model: ClusterModel, moved: list[tuple[int, list[int], list[int]]], back: set[int]
) -> list[tuple[int, list[int], list[int]]]:
    """``moved`` (``moved_partitions``) once a replica of each of partitions ``back`` returned: their
    entries read again in place (the order is by size, which no move changes), every other one as
    it was (only returns changed the model, and none of theirs)."""
    out = []
    for entry in moved:
        p = entry[0]
        if p in back:
            out.extend(_moved(p, model.orig_replicas[p].tolist(), model.replicas[p].tolist()))
        else:
            out.append(entry)
    return out


def _moved(p: int, old: list[int], new: list[int]) -> list[tuple[int, list[int], list[int]]]:
    was, now = set(old), set(new)
    was.discard(-1)
    now.discard(-1)
    left = was - now
    return [(p, sorted(left), sorted(now - was))] if left else []


def pair_ok(
    first: Move,
    second: Move,
    model: ClusterModel,
    resource: Sequence[ResourceGoal],
    structural: Sequence[Goal],
) -> bool:
    """Apply ``first`` then ``second`` (replica moves between the same two brokers, opposite ways)
    if for each ``resource`` goal neither the two brokers' larger distance outside its limits nor
    their sum grows, the plan's caps allow both, and each ``structural`` goal accepts each in turn;
    else leave the model as it was."""
    if not (model.allowed(first) and model.allowed(second)):
        return False
    a, c = first.dst, first.src
    # The two brokers' loads after both, as ``apply`` leaves them (the partitions differ, so the
    # second's load does not depend on the first): the resource goals judge the pair before it applies.
    take, give = model.contrib(first.p, c), model.contrib(second.p, a)
    at_a, at_c = model.load[a] + take - give, model.load[c] - take + give
    for g in resource:
        was = _terms(g, model, (a, model.load[a, g.dim]), (c, model.load[c, g.dim]))
        now = _terms(g, model, (a, at_a[g.dim]), (c, at_c[g.dim]))
        if any(n > w + EPS * max(1.0, w) for n, w in zip(now, was, strict=True)):
            return False
    mark, swapped = len(model.log), set(model.swapped)
    for move in (first, second):
        if not (all(g.accept(move, model) for g in structural) and model.within_caps(move)):
            model.undo_to(mark, swapped)
            return False
        model.apply(move)
    return True


def _terms(goal: ResourceGoal, model: ClusterModel, *loads: tuple[int, float]) -> tuple[float, float]:
    """Brokers' distance outside ``goal``'s limits at the given (broker, load): the larger (a figure
    no worse) and the sum (the goal's metric no worse)."""
    terms = [goal.term(model, b, load) for b, load in loads]
    return max(terms), sum(terms)
