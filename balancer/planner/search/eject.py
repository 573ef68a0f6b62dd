"""Ejection chains: one heavy replica that no single move or swap can place moves to a receiver,
which then passes lighter replicas on until it is back within every limit."""

from __future__ import annotations

import numpy as np

from ..actions import Move
from .constants import DEST_TRIES, EJECT_HEADS, EJECT_PICKS, EJECT_RECEIVERS, EJECT_TRIES, EPS, REPLICA_MOVE
from .context import SearchContext
from .screen import dest_mask, source_ok


def eject_out(a: int, ctx: SearchContext) -> None:
    """Move one of the heaviest replicas off ``a`` (over this goal's limit and setting its figure)
    to a receiver with no room for it yet, which then sheds lighter replicas to other brokers
    until it is within every optimized goal's limits again (``chain``).

    The EJECT_HEADS lightest replicas that alone cover a's excess (else the heaviest) are tried,
    each on the EJECT_RECEIVERS receivers that would have the least to shed on this goal's
    dimension; a receiver must be able to hold the heavy replica alone and end below ``a``'s
    utilization.
    """
    model, goal = ctx.model, ctx.goal
    dim = goal.dim
    ps = model.partitions_on(a)
    ps = ps[model.movable[ps]]
    relief = goal.relief(model, ps, a)
    # Data first: the lightest replicas that alone cover a's excess, else the heaviest (a head
    # beyond the excess copies its overshoot, and the receiver sheds about as much again).
    upper, _ = goal.limits(model)
    need = model.load[a, dim] - upper[a] * model.cap[a, dim]
    covering = relief >= need
    order = np.lexsort((np.where(covering, relief, -relief), ~covering))
    heads = ps[order][:EJECT_HEADS]
    for p in heads.tolist():
        if not goal.over(model, a):
            return
        vec = model.contrib(p, a)
        if vec[dim] <= 0 or not source_ok(a, vec, ctx):
            continue
        receivers = model.dest_ok.copy()
        row = model.replicas[p]
        receivers[row[row >= 0]] = False
        if ctx.rack is not None:
            rm = ctx.rack.dest_mask(model, p, a)
            if rm is not None:
                receivers &= rm
        for g in ctx.res_goals:
            upper, _ = g.limits(model)
            receivers &= vec[g.dim] <= upper * model.cap[:, g.dim]
        receivers &= vec[dim] / model.cap[:, dim] < model.util(dim)[a] - EPS
        cands = np.flatnonzero(receivers)
        if not len(cands):
            continue
        upper, _ = goal.limits(model)
        short = model.load[cands, dim] + vec[dim] - upper[cands] * model.cap[cands, dim]
        for b in cands[np.argsort(short, kind="stable")][:EJECT_RECEIVERS].tolist():
            if chain(p, a, b, ctx):
                break


def chain(p: int, a: int, b: int, ctx: SearchContext) -> bool:
    """Move ``p``'s replica ``a`` -> ``b``, then shed ``b`` back within every optimized resource
    goal's limits. The chain counts as a whole: the first move must pass every check that is not
    a resource limit (racks, caps...), each later move every check; it is kept only if no checked
    goal's metric got worse and this goal's fell. True if kept."""
    model = ctx.model
    move = Move(REPLICA_MOVE, p, a, b)
    # A guarded resource (network_out, carried along with a leader's replica) is held to its guard
    # as by any other move: no goal checks it yet, and the chain would leave it worse.
    if not ctx.opens(move) or not ctx.goal.keeps_guards(move, model, ctx.guard_ratio):
        return False
    before = ctx.metrics()
    mark, swapped = len(model.log), set(model.swapped)
    model.apply(move)
    tries = 0
    over = overflow(b, ctx)
    while over.any() and tries < EJECT_TRIES:
        qs = model.partitions_on(b)
        qs = qs[model.movable[qs] & (qs != p)]
        if not len(qs):
            break
        # Most of the overflow relieved per byte moved (a fixed cost per move counted as bytes).
        carried = model.contrib_matrix(qs, b)
        dims = np.flatnonzero(over > 0)
        share = (np.minimum(carried[:, dims], over[dims]) / over[dims]).sum(axis=1)
        score = share / (model.size[qs] + model.move_overhead)
        picks = np.argsort(-score, kind="stable")[:EJECT_PICKS]
        moved = False
        for q in qs[picks[share[picks] > 0]].tolist():
            tries += 1
            if eject(q, b, a, ctx):
                moved = True
                break
        if not moved:
            break
        over = overflow(b, ctx)
    if not over.any() and ctx.better(before):
        return True
    model.undo_to(mark, swapped)
    return False


def overflow(b: int, ctx: SearchContext) -> np.ndarray:
    """Per dimension, the load ``b`` carries above the tightest optimized goal's upper limit (0 where
    it is within every one)."""
    model = ctx.model
    over = np.zeros(model.load.shape[1])
    for g in ctx.res_goals:
        upper, _ = g.limits(model)
        tol = EPS * max(1.0, abs(upper[b])) - g.margin
        over[g.dim] = max(over[g.dim], model.load[b, g.dim] - (upper[b] + tol) * model.cap[b, g.dim])
    return over


def eject(q: int, b: int, a: int, ctx: SearchContext) -> bool:
    """Move ``q``'s replica off ``b`` to the coldest of the DEST_TRIES destinations (never ``a``)
    that every limit admits and every checked goal accepts. True if it moved."""
    model, goal = ctx.model, ctx.goal
    vec = model.contrib(q, b)
    if not source_ok(b, vec, ctx):
        return False
    mask = dest_mask(q, b, vec, ctx)
    mask[a] = False
    dests = np.flatnonzero(mask)
    if not len(dests):
        return False
    dests = dests[np.argsort(model.util(goal.dim)[dests], kind="stable")][:DEST_TRIES]
    return any(
        goal.keeps_guards(m, model, ctx.guard_ratio) and ctx.try_move(m)
        for m in (Move(REPLICA_MOVE, q, b, d) for d in dests.tolist())
    )
