"""Moving one replica off a broker to the best destination every goal accepts (the coldest the limits
admit), and the leadership hand-offs that let a leader replica go where its network_out would
overload the destination."""

from __future__ import annotations

import numpy as np

from ..actions import Move
from ..model import DISK, OUT
from .constants import DEST_TRIES, EPS, LEADERSHIP, RELAY_TRIES, REPLICA_MOVE
from .context import SearchContext
from .screen import dest_mask, first_dests, source_ok


def short_brokers(ctx: SearchContext) -> np.ndarray:
    """Per broker: under the goal's lower limit (and able to receive)."""
    model, goal = ctx.model, ctx.goal
    _, lower = goal.limits(model)
    short: np.ndarray = (model.load[:, goal.dim] < lower * model.cap[:, goal.dim]) & model.dest_ok
    return short


def move_out(part: int, src: int, ctx: SearchContext, *, to_short: bool = False) -> bool:
    """Move partition ``part``'s replica off ``src`` to the first of the DEST_TRIES coldest
    destinations that every limit admits and every goal accepts. True if it moved. With
    ``to_short``, only to brokers under the goal's lower limit (``short_brokers``): a data-first
    shed's bytes go first where the fill would otherwise copy the same relief (``shed.shed``)."""
    model, goal = ctx.model, ctx.goal
    vec = model.contrib(part, src)
    if not source_ok(src, vec, ctx):
        return False
    found = first_dests(part, src, vec, ctx, to_short=to_short)
    dests = found if found is not None else masked_dests(part, src, vec, ctx, to_short=to_short)
    for dst in dests:
        move = Move(REPLICA_MOVE, part, src, dst)
        if goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
            return True
    if goal.guards and model.leader[part] == src:
        for dst in dests:
            if move_with_handback(Move(REPLICA_MOVE, part, src, dst), ctx):
                return True
        if ctx.data_first:
            for dst in dests:
                if move_as_follower(Move(REPLICA_MOVE, part, src, dst), ctx):
                    return True
            for dst in dests:
                if move_with_relay(Move(REPLICA_MOVE, part, src, dst), ctx):
                    return True
    return False


def masked_dests(part: int, src: int, vec: np.ndarray, ctx: SearchContext, *, to_short: bool) -> list[int]:
    """``move_out``'s destinations (``screen.first_dests``) from the masks over every broker."""
    model, goal = ctx.model, ctx.goal
    mask = dest_mask(part, src, vec, ctx)
    if to_short:
        mask &= short_brokers(ctx)
    dests = np.nonzero(mask)[0]
    if not len(dests):
        return []
    util = model.util(goal.dim)[dests]
    if goal.prefers_disk_room:
        # Destinations whose disk stays within the disk goal's target first (that goal runs
        # later and would move the bytes again), the coldest on this goal's dimension in each.
        disk_after = (model.load[dests, DISK] + vec[DISK]) / model.cap[dests, DISK]
        dests = dests[np.lexsort((util, disk_after > ctx.disk_line + EPS))][:DEST_TRIES]
    else:
        dests = dests[np.argsort(util, kind="stable")][:DEST_TRIES]
    found: list[int] = dests.tolist()
    return found


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
    if not ctx.try_move(hand):
        return None
    if goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
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
    if not ctx.try_move(Move(LEADERSHIP, q, dst, a)):
        return False
    if goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
        return True
    model.apply(Move(LEADERSHIP, q, a, dst))  # undo: the pair only counts together
    return False
