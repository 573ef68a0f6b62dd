"""Shedding: moving load off each broker over the goal's upper limit, the hottest first."""

from __future__ import annotations

import numpy as np

from ..actions import Move
from ..model import DISK, OUT
from .constants import (
    BEST_FIT_WINDOW,
    DEST_TRIES,
    EPS,
    LEADERSHIP,
    RELAY_TRIES,
    REPLICA_MOVE,
    SCREEN_CHUNK,
    SCREEN_FIRST,
)
from .context import SearchContext
from .cost import affordable, beyond_whole, cover_data, move_cost, negligible_giants
from .eject import eject_out
from .leadership import shed_leaderships, swap_leadership
from .refill import refill_out
from .screen import dest_mask, source_ok, source_ok_many
from .swap import swap_out


def shed_all(ctx: SearchContext) -> None:
    """Shed each broker over the goal's upper limit (by more than its slack), the hottest first,
    each once: what is left on one after its shed is all the goal's checks allow."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    stuck: set[int] = set()
    while True:
        excess = model.util(goal.dim) - upper
        over = [
            b
            for b in np.argsort(-excess, kind="stable").tolist()
            if excess[b] > goal.slack(model) and b not in stuck
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
    transfers (no data), then replica moves (data first: to brokers under the goal's lower limit
    first, then to any), then swaps, then swaps of two leaderships; where the goal ejects and ``a``
    still sets its figure, an ejection chain."""
    model, goal = ctx.model, ctx.goal
    if goal.leadership:
        shed_leaderships(a, ctx)
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
            # least data for the traffic excess. Past that the bytes buy traffic alone, and the
            # cost is sized down as a data-first shed's.
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
            ctx.to_short = True
            try:
                shed_moves(a, ps, relief, key, ctx)
            finally:
                ctx.to_short = False
        if goal.over(model, a):
            still = (model.replicas[ps] == a).any(axis=1)
            shed_moves(a, ps[still], relief[still], key[still], ctx)
    if goal.swaps and goal.over(model, a):
        swap_out(a, ctx)
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
            take_back(a, [m for m in model.log[ctx.start :] if m.kind == REPLICA_MOVE and m.src == a], ctx)


def disk_hot_cost(
    a: int, ps: np.ndarray, relief: np.ndarray, need: float, ctx: SearchContext
) -> tuple[float | None, np.ndarray]:
    """The per-move cost and ranked relief of a traffic shed of ``a`` where the disk goal has work:
    the goal's ceiling (None) and ``relief`` itself, unless ``a``'s disk is over the disk goal's
    line and the ceiling's order would copy more than the data slack over the larger of a's disk
    excess and the least data for ``need``; then the cost ``move_cost`` sizes with that floor and
    relief capped at ``need`` (relief beyond a's excess is worth nothing)."""
    model, goal = ctx.model, ctx.goal
    disk_excess = float(model.load[a, DISK] - ctx.disk_line * model.cap[a, DISK])
    if not disk_excess > 0:  # within the line, or no line (the disk goal will not act)
        return None, relief
    ceiling = goal.move_overhead_ceiling(model)
    capped = np.minimum(relief, need)
    cost = move_cost(model.size[ps], capped, need, ceiling, ctx.data_slack, floor=disk_excess)
    if cost >= ceiling:
        return None, relief
    return cost, capped


def shed_moves(a: int, ps: np.ndarray, relief: np.ndarray, key: np.ndarray, ctx: SearchContext) -> None:
    """Move replicas ``ps`` (in the goal's order, ``key`` ascending) off ``a`` as the goal sheds."""
    if ctx.goal.sheds_best_fit:
        best_fit_out(a, ps, relief, np.floor(-key), ctx)
    else:
        shed_in_order(a, ps, relief, ctx)


def short_brokers(ctx: SearchContext) -> np.ndarray:
    """Per broker: under the goal's lower limit (and able to receive)."""
    model, goal = ctx.model, ctx.goal
    _, lower = goal.limits(model)
    short: np.ndarray = (model.load[:, goal.dim] < lower * model.cap[:, goal.dim]) & model.dest_ok
    return short


def shed_in_order(a: int, ps: np.ndarray, relief: np.ndarray, ctx: SearchContext) -> None:
    """Move replicas ``ps`` off ``a`` in order while it is over its limit (where the goal covers:
    one replica that alone covers the excess first), then take back what the overshoot does
    not need. Data first: where the goal covers, a replica that alone covers the excess with more
    than the data slack over the data the order's smaller candidates would copy is passed over, by
    ``cover`` and by the order alone (every byte of disk moved relieves one byte: a cold giant
    would overshoot by most of its size)."""
    model, goal = ctx.model, ctx.goal
    moved: list[Move] = []
    tried = np.zeros(len(ps), dtype=bool)
    covered_at = -1
    upper_a = goal.limits(model)[0][a] * model.cap[a, goal.dim]
    budget_at, budget = -1, np.inf
    i, n, misses, chunk = 0, len(ps), 0, 0
    while i < n:
        if not goal.over(model, a):
            break
        if goal.covers and covered_at != model.moves_applied:
            covered_at = model.moves_applied
            if cover(a, ps, relief, tried, moved, ctx):
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
                budget_at, budget = model.moves_applied, cover_budget(a, ps, relief, tried, ctx)
            if model.size[ps[i]] > budget:
                i += 1  # alone it covers the excess with more data than the order needs: skipped
                continue
        p = int(ps[i])
        tried[i] = True
        i += 1
        mark = len(model.log)
        if move_out(p, a, ctx):
            misses, chunk = 0, 0
            if len(model.log) == mark + 1:
                moved.append(model.log[-1])
        else:
            misses += 1
    take_back(a, moved, ctx)


def cover(
    src: int, ps: np.ndarray, relief: np.ndarray, tried: np.ndarray, moved: list[Move], ctx: SearchContext
) -> bool:
    """Finish ``src`` in one move where one replica can: of the untried candidates ``ps`` whose
    relief alone covers src's remaining excess, the smallest data that the other goals' lower
    limits let go, up to DEST_TRIES of them. True if one moved (recorded in ``moved`` for the
    take-back)."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    dim = goal.dim
    need = model.load[src, dim] - upper[src] * model.cap[src, dim]
    covering = np.flatnonzero(~tried & (relief >= need))
    if not len(covering):
        return False
    covering = covering[model.size[ps[covering]] <= cover_budget(src, ps, relief, tried, ctx)]
    if not len(covering):
        return False
    covering = covering[np.argsort(model.size[ps[covering]], kind="stable")]
    free = source_ok_many(src, model.contrib_matrix(ps[covering], src), ctx)
    for pick in covering[free][:DEST_TRIES].tolist():
        tried[pick] = True
        mark = len(model.log)
        if move_out(int(ps[pick]), src, ctx):
            if len(model.log) == mark + 1:
                moved.append(model.log[-1])
            return True
    return False


def cover_budget(a: int, ps: np.ndarray, relief: np.ndarray, tried: np.ndarray, ctx: SearchContext) -> float:
    """Data first: the most one replica that alone covers ``a``'s excess may copy, the data slack over
    what the untried candidates that do not cover it alone would copy, in order, to cover it
    (inf where they cannot)."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    need = model.load[a, goal.dim] - upper[a] * model.cap[a, goal.dim]
    rest = np.flatnonzero(~tried & (relief < need))
    return (1.0 + ctx.data_slack) * cover_data(model.size[ps[rest]], relief[rest], need)


def best_fit_out(a: int, ps: np.ndarray, relief: np.ndarray, bucket: np.ndarray, ctx: SearchContext) -> None:
    """Greedy by relief per byte, but within the best buckets take the smallest replica that
    alone covers a's remaining excess (one move, fewest bytes), else the biggest one. Where the
    search puts data first, a covering replica only if it copies no more than the data slack over the
    order's own data for the excess."""
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    d = goal.dim
    left = list(range(len(ps)))
    moved: list[Move] = []
    while left and goal.over(model, a):
        need = model.load[a, d] - upper[a] * model.cap[a, d]
        top = bucket[left[0]]
        window = [i for i in left[:BEST_FIT_WINDOW] if bucket[i] >= top - 1]
        covering = [i for i in window if relief[i] >= need]
        if covering and ctx.data_first:
            # Data first: one covering move only within the data slack of the data the rest of the
            # order would copy to cover the excess (fewer moves are not worth more bytes).
            rest = ps[left]
            in_order = cover_data(model.size[rest], np.minimum(relief[left], need), need)
            covering = [i for i in covering if model.size[ps[i]] <= (1.0 + ctx.data_slack) * in_order]
        pick = min(covering, key=lambda i: (relief[i], i)) if covering else window[0]
        left.remove(pick)
        mark = len(model.log)
        if move_out(int(ps[pick]), a, ctx) and len(model.log) == mark + 1:
            moved.append(model.log[-1])
    take_back(a, moved, ctx)


def take_back(a: int, moved: list[Move], ctx: SearchContext) -> None:
    """Undo the moves off ``a`` that its overshoot no longer needs, the biggest data first.

    The last picks of a shed can overshoot the limit by more than some earlier, smaller
    moves carried: those go back (fewer moves, less data, ``a`` still within its limit).
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
        room = upper[a] * model.cap[a, d] - model.load[a, d]
        if room <= 0:
            return
        if 0 < model.delta(back)[d] <= room and keeps_disk(back, ctx):
            goal.try_move(back, model, ctx.checks)


def keeps_disk(move: Move, ctx: SearchContext) -> bool:
    """``move`` leaves its receiver's disk within the disk goal's target, or gives it no disk:
    taking data back onto a broker must not make work for the disk goal (it runs later)."""
    model = ctx.model
    d = model.delta(move)[DISK]
    gain = move.dst if d > 0 else move.src
    return bool(d == 0 or (model.load[gain, DISK] + abs(d)) / model.cap[gain, DISK] <= ctx.disk_line + EPS)


def move_out(part: int, src: int, ctx: SearchContext) -> bool:
    """Move partition ``part``'s replica off ``src`` to the first of the DEST_TRIES coldest
    destinations that every limit admits and every goal accepts. True if it moved."""
    model, goal = ctx.model, ctx.goal
    vec = model.contrib(part, src)
    if not source_ok(src, vec, ctx):
        return False
    mask = dest_mask(part, src, vec, ctx)
    if ctx.to_short:
        mask &= short_brokers(ctx)
    dests = np.nonzero(mask)[0]
    if not len(dests):
        return False
    util = model.util(goal.dim)[dests]
    if goal.prefers_disk_room:
        # Destinations whose disk stays within the disk goal's target first (that goal runs
        # later and would move the bytes again), the coldest on this goal's dimension in each.
        disk_after = (model.load[dests, DISK] + vec[DISK]) / model.cap[dests, DISK]
        dests = dests[np.lexsort((util, disk_after > ctx.disk_line + EPS))][:DEST_TRIES]
    else:
        dests = dests[np.argsort(util, kind="stable")][:DEST_TRIES]
    for dst in dests.tolist():
        move = Move(REPLICA_MOVE, part, src, dst)
        if goal.wants(move, model, ctx.guard_ratio) and goal.try_move(move, model, ctx.checks):
            return True
    if goal.guards and model.leader[part] == src:
        for dst in dests.tolist():
            if move_with_handback(Move(REPLICA_MOVE, part, src, dst), ctx):
                return True
        if ctx.data_first:
            for dst in dests.tolist():
                if move_as_follower(Move(REPLICA_MOVE, part, src, dst), ctx):
                    return True
            for dst in dests.tolist():
                if move_with_relay(Move(REPLICA_MOVE, part, src, dst), ctx):
                    return True
    return False


def move_with_relay(move: Move, ctx: SearchContext) -> bool:
    """Move a leader replica whose network_out would overload ``dst`` after ``dst`` hands one of
    its own leaderships (no data), the lightest that makes the room, to a follower whose
    network_out stays within the guarded goal's target band. The pair counts only together. For
    a search that puts data first (``SearchContext.data_first``)."""
    model, goal = ctx.model, ctx.goal
    p, a, dst = move.p, move.src, move.dst
    if not goal.improves(move, model):
        return False
    ratio = ctx.guard_ratio if ctx.guard_ratio is not None else goal.threshold
    excess = (
        model.load[dst, OUT] + model.leader_out[p] - ratio * model.cluster_util(OUT) * model.cap[dst, OUT]
    )
    if excess <= 0:
        return False
    line = goal.guard_band(model, OUT) * model.cap[:, OUT]
    on = model.partitions_on(dst)
    qs = on[(model.leader[on] == dst) & model.movable[on] & (model.rf[on] > 1) & (on != p)]
    qs = qs[model.leader_out[qs] >= excess]
    for q in qs[np.argsort(model.leader_out[qs], kind="stable")][:RELAY_TRIES].tolist():
        room = line - model.load[:, OUT] - model.leader_out[q]
        followers = [b for b in model.replicas[q].tolist() if b >= 0 and b not in (dst, a) and room[b] >= 0]
        for f in sorted(followers, key=lambda b: (-room[b], b)):
            done = _after_leadership(Move(LEADERSHIP, q, dst, f), move, ctx)
            if done is not None:
                return done
    return False


def move_as_follower(move: Move, ctx: SearchContext) -> bool:
    """Move a leader replica whose network_out would overload ``dst`` as a follower: its leadership
    first goes (no data) to another of its replicas whose network_out stays within the target band
    of the guarded goal (that goal runs later and must find nothing to undo there), then the
    replica moves without it. The pair counts only together. For a search that puts data first
    (``SearchContext.data_first``): the cheapest bytes may be led by the broker being shed."""
    model, goal = ctx.model, ctx.goal
    p, a = move.p, move.src
    line = goal.guard_band(model, OUT) * model.cap[:, OUT]
    load = model.load[:, OUT] + model.leader_out[p]
    followers = [b for b in model.replicas[p].tolist() if b >= 0 and b != a and model.dest_ok[b]]
    for f in sorted((b for b in followers if load[b] <= line[b]), key=lambda b: (load[b] / line[b], b)):
        done = _after_leadership(Move(LEADERSHIP, p, a, f), move, ctx)
        if done is not None:
            return done
    return False


def _after_leadership(hand: Move, move: Move, ctx: SearchContext) -> bool | None:
    """``hand`` (a leadership transfer, no data) then ``move``: the pair counts only together, so
    ``hand`` is undone when ``move`` is refused. None when ``hand`` itself is refused (the caller
    may try another), else whether the pair was made."""
    model, goal = ctx.model, ctx.goal
    if not goal.try_move(hand, model, ctx.checks):
        return None
    if goal.wants(move, model, ctx.guard_ratio) and goal.try_move(move, model, ctx.checks):
        return True
    model.apply(Move(LEADERSHIP, hand.p, hand.dst, hand.src))
    return False


def move_with_handback(move: Move, ctx: SearchContext) -> bool:
    """Move a leader replica whose network_out would overload ``dst``, handing ``src`` a
    leadership of ``dst``'s in exchange (no data): ``src`` just lost that much network_out.
    """
    model, goal = ctx.model, ctx.goal
    if not goal.improves(move, model):
        return False
    a, dst, d = move.src, move.dst, OUT
    limit = goal.threshold * model.cluster_util(d)
    lo_p = model.leader_out[move.p]
    excess = model.load[dst, d] + lo_p - limit * model.cap[dst, d]
    if excess <= 0:
        return False
    on_a = model.partitions_on(a)
    qs = on_a[(model.leader[on_a] == dst) & model.movable[on_a]]
    qs = qs[qs != move.p]
    lo_q = model.leader_out[qs]
    fits = (lo_q >= excess) & (model.load[a, d] - lo_p + lo_q <= limit * model.cap[a, d])
    if not fits.any():
        return False
    q = int(qs[fits][np.argmin(lo_q[fits])])
    if not goal.try_move(Move(LEADERSHIP, q, dst, a), model, ctx.checks):
        return False
    if goal.wants(move, model, ctx.guard_ratio) and goal.try_move(move, model, ctx.checks):
        return True
    model.apply(Move(LEADERSHIP, q, a, dst))  # undo: the pair only counts together
    return False
