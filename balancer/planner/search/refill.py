"""Refills: a broker over the goal's limit whose replicas may not leave because another goal's lower
limit binds it (its network_in at that goal's floor) sheds a replica once a lighter one that carries
what the floor needs has moved onto it. The pair counts only together."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..actions import Move
from ..model import IN
from .constants import EPS, REFILL_PICKS, REFILL_SCAN, REFILL_SIZE, REFILL_TRIES, REPLICA_MOVE
from .context import SearchContext
from .cost import least_cover
from .move import move_out
from .screen import source_ok, source_ok_many


def refill_out(a: int, ctx: SearchContext) -> None:
    """Shed ``a`` (over this goal's limit) by pairs: a replica ``q`` of another broker ``c`` moves
    onto ``a`` first, carrying at least what ``a`` lacks of the floors the shed replica ``p`` would
    take it under, then ``p`` moves off ``a`` as a shed moves it. ``q`` holds at most REFILL_SIZE of
    ``p``'s size (its bytes are the pair's overhead) and ``c`` stays within every floor.

    The pairs stand only if together they bring ``a`` within the band that triggers the goal.
    Candidates ``p``: the replicas whose leaving a floor refuses, those that alone relieve the
    excess first (the smallest first), then the rest, the biggest first; none copying more than
    the data slack over the least data for the excess (the smallest replica that covers it alone,
    or the fractional cover by the smaller ones)."""
    model, goal = ctx.model, ctx.goal
    dim = goal.dim
    upper, _ = goal.limits(model)
    need = float(model.load[a, dim] - upper[a] * model.cap[a, dim])
    ps = model.partitions_on(a)
    ps = ps[model.movable[ps]]
    load = model.contrib_matrix(ps, a)
    relief = load[:, dim]
    keep = ~source_ok_many(a, load, ctx) & (relief > 0)
    ps, relief = ps[keep], relief[keep]
    if not len(ps) or need <= 0:
        return
    fit = model.size[ps] <= (1.0 + ctx.data_slack) * least_cover(model.size[ps], relief, need)
    ps, relief = ps[fit], relief[fit]
    covers = relief >= need
    if not len(ps):
        return
    order = np.lexsort((np.where(covers, model.size[ps], -model.size[ps]), ~covers))
    # Those some broker has room for first: a refill frees one only if it can go somewhere (the
    # brokers with room may all sit in a rack its partition already holds).
    order = order[np.argsort(~placeable(ps[order], a, ctx), kind="stable")]
    # The refills any of them could take: the lightest replicas elsewhere first.
    light = np.flatnonzero(model.movable & (model.size <= REFILL_SIZE * model.size[ps].max()))
    light = light[np.argsort(model.size[light], kind="stable")]
    pool = Pool(light, model.size[light], model.bytes_in[light], ~(model.replicas[light] == a).any(axis=1))
    mark, swapped = len(model.log), set(model.swapped)
    misses = 0
    for i in order.tolist():
        if not goal.over(model, a) or misses >= REFILL_TRIES:
            break
        p = int(ps[i])
        if model.holds(p, a) and not pair(p, a, pool, ctx):
            misses += 1
    # All or nothing: each pair copies two replicas, and pairs that leave ``a`` outside the band
    # that triggers the goal leave it violated there; undone (else they unlock moves off ``a``, a
    # giant among them, that its floors had held back).
    trigger, _ = goal.trigger_limits(model)
    if model.util(dim)[a] > trigger[a] + EPS:
        model.undo_to(mark, swapped)


class Pool(NamedTuple):
    """The partitions a refill may take a replica of, the lightest first, and their sizes,
    network_in and whether ``a`` held none of their replicas as the refills began."""

    parts: np.ndarray
    size: np.ndarray
    bytes_in: np.ndarray
    away: np.ndarray


def pair(p: int, a: int, pool: Pool, ctx: SearchContext) -> bool:
    """Move a replica of ``pool`` onto ``a`` that makes up for what ``p`` leaving would take ``a``
    under on each floor, then ``p`` off ``a``; undone together if ``p`` cannot go. True if both
    moved, or ``p`` alone where earlier pairs left ``a`` nothing to make up for it."""
    model, goal = ctx.model, ctx.goal
    vec = model.contrib(p, a)
    lack = np.zeros(model.load.shape[1])
    for g in ctx.res_goals:
        if g is goal:
            continue
        lower = g.limits(model)[1][a]
        if np.isfinite(lower):
            lack[g.dim] = max(lack[g.dim], vec[g.dim] - (model.load[a, g.dim] - lower * model.cap[a, g.dim]))
    dims = np.flatnonzero(lack > 0)
    if not len(dims):
        # Earlier refills lifted ``a``: no floor refuses ``p`` leaving any longer.
        return move_out(p, a, ctx)
    # At most REFILL_SIZE of p's size; every replica of a partition carries its network_in,
    # a leader replica its network_out too (checked per holder below).
    k = int(np.searchsorted(pool.size, REFILL_SIZE * model.size[p], side="right"))
    qs = pool.parts[np.flatnonzero((pool.bytes_in[:k] >= lack[IN]) & pool.away[:k])[:REFILL_SCAN]]
    tried = 0
    for q in qs.tolist():
        for c in model.replicas[q].tolist():
            if c < 0 or c == a:
                continue
            carried = model.contrib(q, c)
            # Cheap screens first: it carries what a lacks, its holder stays above every floor,
            # and racks let it go to ``a``.
            if (carried[dims] < lack[dims]).any() or not source_ok(c, carried, ctx):
                continue
            racks = ctx.rack.dest_mask(model, q, c) if ctx.rack is not None else None
            if racks is not None and not racks[a]:
                continue
            if tried >= REFILL_PICKS:
                return False
            tried += 1
            if refill_then_shed(Move(REPLICA_MOVE, q, c, a), p, a, ctx):
                return True
    return False


def refill_then_shed(refill: Move, p: int, a: int, ctx: SearchContext) -> bool:
    """Apply ``refill`` (checked by every optimized goal: only this goal, whose limit ``a`` is over,
    would refuse bytes onto ``a``), then move ``p`` off ``a``; undo both unless ``p`` moved and
    this goal's metric fell."""
    model, goal = ctx.model, ctx.goal
    if not (model.allowed(refill) and model.within_caps(refill)):
        return False
    if not all(g.accept(refill, model) for g in ctx.optimized):
        return False
    before = goal.metric(model)
    mark, swapped = len(model.log), set(model.swapped)
    model.apply(refill)
    if move_out(p, a, ctx) and goal.metric(model) < before - EPS * max(1.0, before):
        return True
    model.undo_to(mark, swapped)
    return False


def placeable(ps: np.ndarray, a: int, ctx: SearchContext) -> np.ndarray:
    """Per replica of ``ps`` on ``a``: some broker the rack goal admits has room for it under this
    goal's limit and holds no replica of its partition."""
    model, goal = ctx.model, ctx.goal
    dim = goal.dim
    upper, _ = goal.limits(model)
    room = (model.load[:, dim][None, :] + model.size[ps][:, None]) <= (upper * model.cap[:, dim])[None, :]
    room &= model.dest_ok[None, :]
    room &= ~(model.replicas[ps][:, :, None] == np.arange(model.n_brokers)[None, None, :]).any(axis=1)
    racks = ctx.rack.dest_masks(model, ps, a) if ctx.rack is not None else None
    if racks is not None:
        room &= racks
    ok: np.ndarray = room.any(axis=1)
    return ok
