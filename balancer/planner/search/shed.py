"""Shedding: moving load off each broker over the goal's upper limit, the hottest first."""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from ..actions import Move
from ..model import DISK
from .constants import (
    BEST_FIT_WINDOW,
    DEST_TRIES,
    EPS,
    REPLICA_MOVE,
    SCREEN_CHUNK,
    SCREEN_FIRST,
)
from .context import SearchContext
from .cost import affordable, beyond_whole, cover_data, move_cost, negligible_giants
from .eject import eject_out
from .leadership import hand_off_heavy, shed_leaderships, swap_leadership
from .move import move_out, short_brokers
from .refill import refill_out
from .screen import source_ok_many
from .swap import swap_out


def shed_all(ctx: SearchContext) -> None:
    """Shed each broker over the goal's upper limit (by more than its slack), the hottest first,
    each once: what is left on one after its shed is all the goal's checks allow."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    stuck: set[int] = set()
    while True:
        excess = model.util(goal.dim) - upper
        slack = goal.slack(model)
        over = [
            b for b in np.argsort(-excess, kind="stable").tolist() if excess[b] > slack and b not in stuck
        ]
        if not over:
            return
        a = over[0]
        shed(a, ctx)
        if goal.guards and goal.over(model, a) and goal.sets_figure(model, a):
            # ``a`` defines this resource's figure and the guard held it back: let guarded
            # resources rise up to a's level, which leaves max(in, out) no worse.
            ctx.guard_ratio = model.util(goal.dim)[a] / model.cluster_util(goal.dim)
            try:
                shed(a, ctx)
            finally:
                ctx.guard_ratio = None
        stuck.add(a)  # everything movable off ``a`` was tried


def shed(a: int, ctx: SearchContext) -> None:
    """Take load off ``a`` while it is over its limit, by the actions the goal allows: leadership
    transfers (no data) and, where the goal hands off and ``a`` sets its figure, a heavy leadership
    handed to a follower that passes light ones on; then replica moves (data first: to brokers under
    the goal's lower limit first, then to any), then swaps, then swaps of two leaderships; where the
    goal ejects and ``a`` still sets its figure, an ejection chain."""
    model, goal = ctx.model, ctx.goal
    if goal.leadership:
        shed_leaderships(a, ctx)
        if goal.hands_off and goal.over(model, a) and goal.sets_figure(model, a):
            hand_off_heavy(a, ctx)
    if goal.moves and goal.over(model, a):
        ps = model.partitions_on(a)
        ps = ps[model.movable[ps]]
        relief = goal.relief(model, ps, a)
        upper, _ = goal.limits(model)
        need = float(model.load[a, goal.dim] - upper[a] * model.cap[a, goal.dim])
        keep = relief > 0
        ps, relief = ps[keep], relief[keep]
        # A giant that relieves almost nothing of the excess is no candidate: where the shed cannot
        # reach the line (the replicas that would are held back by other goals) the order goes on
        # to the coldest replicas and moves each whole, for no relief a figure shows.
        keep = ~negligible_giants(model.size[ps], relief, need, ctx.data_slack)
        ps, relief = ps[keep], relief[keep]
        overhead, ranked = None, relief
        if ctx.data_first:
            # Data + cost x moves, the cost sized for this shed; relief beyond a's excess is
            # worth nothing, so a replica hotter than the excess ranks by what it relieves of it.
            ranked = np.minimum(relief, need)
            # A giant the shed would pass over (too much data alone) is no candidate: ranked by
            # relief per move it would come first at every cost and size the cost down to the
            # smallest, with thousands of tiny moves.
            keep = affordable(model.size[ps], ranked, need, ctx.data_slack)
            ps, relief, ranked = ps[keep], relief[keep], ranked[keep]
            overhead = move_cost(
                model.size[ps], ranked, need, goal.move_overhead_ceiling(model), ctx.data_slack
            )
        elif goal.weighs_moves:
            # The disk goal has work (see ``SearchContext.data_first``). The bytes this shed copies
            # off a broker over the disk goal's line, up to its excess there, relieve disk as well
            # (bytes that goal would move anyway): the ceiling cost and its few big moves stand
            # while they copy no more than the data slack over the larger of that excess and the
            # least data for the traffic excess. Past that, and off a broker within the line (no
            # excess), the bytes buy traffic alone, and the cost is sized down as a data-first
            # shed's.
            overhead, ranked = disk_hot_cost(a, ps, relief, need, ctx)
        key = goal.move_key(model, ps, ranked, a, overhead=overhead)
        order = np.argsort(key, kind="stable")
        if goal.defers_giants and np.isfinite(ctx.disk_line):
            # A limit above the disk goal's line: the broker must in the end lose all its disk over
            # that line, and a replica copying more than the data slack over the least data for
            # all of it overshoots the line on the broker and on its receiver (the disk goal then
            # sheds the receiver). Such giants go last, moved only where the rest cannot relieve;
            # not one that alone takes the broker over the line (it sets a figure wherever it
            # stays, and only this goal may move it to a broker it takes over the line).
            line = ctx.disk_line * model.cap[a, goal.dim]
            whole = float(model.load[a, goal.dim] - line)
            late = beyond_whole(model.size[ps], relief, whole, ctx.data_slack) & (model.size[ps] <= line)
            order = order[np.argsort(late[order], kind="stable")]
        ps, relief, key = ps[order], relief[order], key[order]
        if ctx.data_first and short_brokers(ctx).any():
            # Bytes a broker under the lower limit needs first: the fill would otherwise copy
            # the same relief there again, off brokers that did not need to lose it.
            shed_moves(a, ps, relief, key, ctx, to_short=True)
        if goal.over(model, a):
            still = (model.replicas[ps] == a).any(axis=1)
            shed_moves(a, ps[still], relief[still], key[still], ctx)
    if goal.swaps and goal.over(model, a):
        mark = len(model.log)
        swap_out(a, ctx)
        if len(model.log) > mark:
            # A swap's heavy replica may relieve what the moves before it did: those go back
            # where a's limit has room for them (no data, fewer moves); a disk goal's only up to
            # the average, leaving room for the later sheds of other brokers onto ``a``.
            take_back(a, moved_off(a, ctx, mark), ctx, to_average=goal.dim == DISK)
    if goal.leadership and goal.over(model, a):
        swap_leadership(a, ctx)
    if goal.refills and goal.over(model, a) and goal.sets_figure(model, a):
        refill_out(a, ctx)
    if goal.ejects and goal.over(model, a) and goal.sets_figure(model, a):
        mark = len(model.log)
        eject_out(a, ctx)
        if len(model.log) > mark:
            # The chain's heavy replica may relieve what the moves before it did: those go back
            # where a's limit has room for them (no data, fewer moves).
            take_back(a, moved_off(a, ctx, mark), ctx)


def disk_hot_cost(
    a: int, ps: np.ndarray, relief: np.ndarray, need: float, ctx: SearchContext
) -> tuple[float | None, np.ndarray]:
    """The per-move cost and ranked relief of a traffic shed of ``a`` where the disk goal has work:
    the goal's ceiling (None) and ``relief`` itself, unless the ceiling's order would copy more
    than the data slack over the larger of a's disk excess over the disk goal's line (none for a
    broker within it) and the least data for ``need``; then the cost ``move_cost`` sizes with
    that floor and relief capped at ``need`` (relief beyond a's excess is worth nothing)."""
    model, goal = ctx.model, ctx.goal
    disk_excess = float(model.load[a, DISK] - ctx.disk_line * model.cap[a, DISK])
    if not np.isfinite(disk_excess):  # no line (the disk goal will not act)
        return None, relief
    ceiling = goal.move_overhead_ceiling(model)
    capped = np.minimum(relief, need)
    cost = move_cost(model.size[ps], capped, need, ceiling, ctx.data_slack, floor=max(disk_excess, 0.0))
    if cost >= ceiling:
        return None, relief
    return cost, capped


def shed_moves(
    a: int,
    ps: np.ndarray,
    relief: np.ndarray,
    key: np.ndarray,
    ctx: SearchContext,
    *,
    to_short: bool = False,
) -> None:
    """Move replicas ``ps`` (in the goal's order, ``key`` ascending) off ``a`` as the goal sheds;
    with ``to_short``, only to brokers under the goal's lower limit (``move.move_out``)."""
    if ctx.goal.sheds_best_fit:
        best_fit_out(a, ps, relief, np.floor(-key), ctx, to_short=to_short)
    else:
        shed_in_order(a, ps, relief, ctx, to_short=to_short)


def shed_in_order(
    a: int, ps: np.ndarray, relief: np.ndarray, ctx: SearchContext, *, to_short: bool = False
) -> None:
    """Move replicas ``ps`` off ``a`` in order while it is over its limit (where the goal covers:
    one replica that alone covers the excess first), then take back what the overshoot does
    not need. Data first: where the goal covers, a replica that alone covers the excess with more
    than the data slack over the data the order's smaller candidates would copy is passed over, by
    ``cover`` and by the order alone (every byte of disk moved relieves one byte: a cold giant
    would overshoot by most of its size)."""
    model, goal = ctx.model, ctx.goal
    moved: list[Move] = []
    tried = np.zeros(len(ps), dtype=bool)
    size = model.size[ps]
    covered_at = -1
    upper_a = goal.limits(model)[0][a] * model.cap[a, goal.dim]
    budget_at, budget = -1, np.inf
    i, n, misses, chunk = 0, len(ps), 0, 0
    while i < n:
        if not goal.over(model, a):
            break
        if goal.covers and covered_at != model.moves_applied:
            covered_at = model.moves_applied
            if cover(a, ps, size, relief, tried, moved, ctx, to_short=to_short):
                continue
        if tried[i]:
            i += 1
            continue
        if misses >= SCREEN_FIRST:
            # Candidates whose leaving would take ``a`` under another goal's lower
            # limit fail ``source_ok`` and change nothing: skipped in one step.
            chunk = max(chunk, SCREEN_FIRST)
            cand = ps[i : i + chunk]
            hits = np.flatnonzero(source_ok_many(a, model.contrib_matrix(cand, a), ctx))
            if not len(hits):
                i += len(cand)
                chunk = min(4 * chunk, SCREEN_CHUNK)
                continue
            if hits[0] < SCREEN_FIRST // 4:
                misses, chunk = 0, 0
            i += int(hits[0])
        if tried[i]:
            i += 1
            continue
        if goal.covers and relief[i] >= model.load[a, goal.dim] - upper_a:
            if budget_at != model.moves_applied:
                budget_at, budget = model.moves_applied, cover_budget(a, size, relief, tried, ctx)
            if size[i] > budget:
                i += 1  # alone it covers the excess with more data than the order needs: skipped
                continue
        p = int(ps[i])
        tried[i] = True
        i += 1
        mark = len(model.log)
        if move_out(p, a, ctx, to_short=to_short):
            misses, chunk = 0, 0
            if len(model.log) == mark + 1:
                moved.append(model.log[-1])
        else:
            misses += 1
    take_back(a, moved, ctx)


def cover(
    src: int,
    ps: np.ndarray,
    size: np.ndarray,
    relief: np.ndarray,
    tried: np.ndarray,
    moved: list[Move],
    ctx: SearchContext,
    *,
    to_short: bool = False,
) -> bool:
    """Finish ``src`` in one move where one replica can: of the untried candidates ``ps`` whose
    relief alone covers src's remaining excess, the smallest data (``size``, theirs) that the other
    goals' lower limits let go, up to DEST_TRIES of them. True if one moved (recorded in ``moved``
    for the take-back)."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    dim = goal.dim
    need = model.load[src, dim] - upper[src] * model.cap[src, dim]
    covering = np.flatnonzero(~tried & (relief >= need))
    if not len(covering):
        return False
    covering = covering[size[covering] <= cover_budget(src, size, relief, tried, ctx)]
    if not len(covering):
        return False
    covering = covering[np.argsort(size[covering], kind="stable")]
    free = source_ok_many(src, model.contrib_matrix(ps[covering], src), ctx)
    for pick in covering[free][:DEST_TRIES].tolist():
        tried[pick] = True
        mark = len(model.log)
        if move_out(int(ps[pick]), src, ctx, to_short=to_short):
            if len(model.log) == mark + 1:
                moved.append(model.log[-1])
            return True
    return False


def cover_budget(
    a: int, size: np.ndarray, relief: np.ndarray, tried: np.ndarray, ctx: SearchContext
) -> float:
    """Data first: the most one replica that alone covers ``a``'s excess may copy, the data slack over
    what the untried candidates (their sizes ``size``) that do not cover it alone would copy, in
    order, to cover it (inf where they cannot)."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    need = model.load[a, goal.dim] - upper[a] * model.cap[a, goal.dim]
    rest = np.flatnonzero(~tried & (relief < need))
    return (1.0 + ctx.data_slack) * cover_data(size[rest], relief[rest], need)


def best_fit_out(
    a: int,
    ps: np.ndarray,
    relief: np.ndarray,
    bucket: np.ndarray,
    ctx: SearchContext,
    *,
    to_short: bool = False,
) -> None:
    """Greedy by relief per byte, but within the best buckets take the smallest replica that
    alone covers a's remaining excess (one move, fewest bytes), else the biggest one. Where the
    search puts data first, a covering replica only if it copies no more than the data slack over the
    order's own data for the excess.

    ``bucket`` never rises along ``ps`` (the goal's order, its key ascending): the buckets within
    one of the best left are the first of those left."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    d = goal.dim
    left = list(range(len(ps)))
    moved: list[Move] = []
    # Read one at a time below: Python's own floats (``need`` too), compared without numpy's scalars.
    buckets, reliefs, sizes = bucket.tolist(), relief.tolist(), model.size[ps].tolist()
    below = [-b for b in buckets]  # ascending along ``ps``: what ``bisect`` searches
    while left and goal.over(model, a):
        need = float(model.load[a, d] - upper[a] * model.cap[a, d])
        top = buckets[left[0]]
        end = bisect_right(left, 1 - top, hi=min(BEST_FIT_WINDOW, len(left)), key=below.__getitem__)
        window = left[:end]  # those of the first BEST_FIT_WINDOW left whose bucket is >= top - 1
        covering = [i for i in window if reliefs[i] >= need]
        if covering and ctx.data_first:
            # Data first: one covering move only within the data slack of the data the rest of the
            # order would copy to cover the excess (fewer moves are not worth more bytes).
            rest = ps[left]
            in_order = cover_data(model.size[rest], np.minimum(relief[left], need), need)
            most = (1.0 + ctx.data_slack) * in_order
            covering = [i for i in covering if sizes[i] <= most]
        pick = min(covering, key=lambda i: (reliefs[i], i)) if covering else window[0]
        left.remove(pick)
        mark = len(model.log)
        if move_out(int(ps[pick]), a, ctx, to_short=to_short) and len(model.log) == mark + 1:
            moved.append(model.log[-1])
    take_back(a, moved, ctx)


def moved_off(a: int, ctx: SearchContext, stop: int) -> list[Move]:
    """This search's replica moves off ``a`` logged before ``stop``."""
    return [m for m in ctx.model.log[ctx.start : stop] if m.kind == REPLICA_MOVE and m.src == a]


def take_back(a: int, moved: list[Move], ctx: SearchContext, *, to_average: bool = False) -> None:
    """Undo the moves off ``a`` that its overshoot no longer needs, the biggest data first.

    The last picks of a shed can overshoot the limit by more than some earlier, smaller
    moves carried: those go back (fewer moves, less data, ``a`` still within its limit; with
    ``to_average``, at most up to the cluster's average utilization).
    """
    model, goal = ctx.model, ctx.goal
    if len(moved) < 2:
        return
    upper, _ = goal.limits(model)
    d = goal.dim
    for move in sorted(moved, key=lambda m: (-model.size[m.p], m.p)):
        back = Move(REPLICA_MOVE, move.p, move.dst, a)
        if not model.holds(move.p, move.dst) or model.holds(move.p, a):
            continue
        line = min(upper[a], model.cluster_util(d)) if to_average else upper[a]
        room = line * model.cap[a, d] - model.load[a, d]
        if room <= 0:
            return
        if 0 < model.delta(back)[d] <= room and keeps_disk(back, ctx):
            ctx.try_move(back)


def keeps_disk(move: Move, ctx: SearchContext) -> bool:
    """``move`` leaves its receiver's disk within the disk goal's target, or gives it no disk:
    taking data back onto a broker must not make work for the disk goal (it runs later)."""
    model = ctx.model
    d = model.delta(move)[DISK]
    gain = move.dst if d > 0 else move.src
    return bool(d == 0 or (model.load[gain, DISK] + abs(d)) / model.cap[gain, DISK] <= ctx.disk_line + EPS)
