"""Swaps: a heavy replica on a broker over its limit for a lighter one on a cold partner."""

from __future__ import annotations

import numpy as np

from ..actions import Move
from ..model import DISK
from .constants import BARREN_AFTER, REPLICA_MOVE, SWAP, SWAP_DATA_CAP, SWAP_OFFERS, SWAP_PARTNERS, SWAP_PICKS
from .context import SearchContext
from .screen import SwapBounds, swap_limits, swap_screen


def swap_out(src: int, ctx: SearchContext) -> None:
    """Exchange a heavy replica on ``src`` (over this goal's limit) for a lighter one on a cold
    partner broker.

    For each offered replica, every replica on the partner is screened at once (numpy)
    against the limits of every optimized resource goal, so only exchanges that can pass
    are tried; the full ``accept`` chain (racks included) still decides.
    """
    model, goal = ctx.model, ctx.goal
    if not model.dest_ok[src]:
        return  # an excluded broker takes nothing back
    dim = goal.dim
    upper, _ = goal.limits(model)
    util = model.util(dim)
    eligible = model.dest_ok.copy()
    eligible[src] = False
    # Every replica carries network_in and disk: where ``src`` may not lose one of them (under
    # that goal's lower limit), a partner under the same limit may not lose it either, so only
    # exchanges of exactly equal load would pass. Such partners are skipped.
    for other in ctx.res_goals:
        if other is not goal and other.carried_by_every_replica and other.dim != dim:
            _, lower = other.limits(model)
            if model.load[src, other.dim] < lower[src] * model.cap[src, other.dim]:
                eligible &= model.load[:, other.dim] > lower * model.cap[:, other.dim]
    # A partner that gave no exchange BARREN_AFTER times in this optimize is passed over (e.g. a
    # cold broker pinned under another goal's lower limit): its slot goes to the next coldest.
    cold = [partner for partner in np.argsort(util, kind="stable").tolist() if eligible[partner]]
    cold = [partner for partner in cold if ctx.barren.get(partner, 0) < BARREN_AFTER]
    cold = cold[:SWAP_PARTNERS]
    offers, version = None, -1
    for partner in cold:
        if not goal.over(model, src):
            return
        if version != model.moves_applied:
            # The SWAP_OFFERS replicas on ``src`` it would give first (this goal's order): recomputed
            # only after a swap changed what ``src`` holds.
            offered = model.partitions_on(src)
            offered = offered[model.movable[offered]]
            offered_load = model.contrib_matrix(offered, src)
            keep = offered_load[:, dim] > 0
            offered, offered_load = offered[keep], offered_load[keep]
            key = goal.move_key(model, offered, offered_load[:, dim], src)
            first = np.argsort(key, kind="stable")[:SWAP_OFFERS]
            offers, version = (offered[first], offered_load[first]), model.moves_applied
        assert offers is not None
        swap_with(src, partner, offers, upper, ctx)
        if model.moves_applied == version:
            ctx.barren[partner] = ctx.barren.get(partner, 0) + 1


def swap_with(
    src: int, partner: int, offers: tuple[np.ndarray, np.ndarray], upper: np.ndarray, ctx: SearchContext
) -> None:
    """Swaps between ``src`` and one ``partner``: each of ``offers`` (replicas on ``src`` and
    their contributions, in the order tried) against every replica on ``partner``."""
    model, goal = ctx.model, ctx.goal
    dim = goal.dim
    offered, offered_load = offers
    free = ~(model.replicas[offered] == partner).any(axis=1)
    offered, offered_load = offered[free], offered_load[free]
    if not len(offered):
        return
    held = model.partitions_on(partner)
    on_src = model.partitions_on(src)  # sorted, as ``held`` (and not empty: the offers are on it)
    at = np.minimum(np.searchsorted(on_src, held), len(on_src) - 1)
    held = held[model.movable[held] & (on_src[at] != held)]  # a partition on both is not exchanged
    if not len(held):
        return
    # One row per dimension: each offer reads whole dimensions of the partner's replicas.
    held_cols = model.contrib_columns(held, partner)
    ratio, wide = data_ratios(src, ctx)
    held_size = model.size[held]
    # The rack goal judges each side of a swap on its own partition: an offer it refuses to the
    # partner, or a pick it refuses to ``src``, is passed over before any figure is worked out.
    rack = ctx.rack if ctx.rack is not None and model.rack[src] != model.rack[partner] else None
    stale = True  # loads change only when a swap is made: the figures below hold until one is
    for offer in range(len(offered)):
        if not goal.over(model, src):
            return
        if rack is not None and not rack.accept(Move(REPLICA_MOVE, int(offered[offer]), src, partner), model):
            continue  # before the figures: an offer the partner's rack refuses needs none of them
        if stale:
            room = upper[partner] * model.cap[partner, dim] - model.load[partner, dim]
            need = model.load[src, dim] - upper[src] * model.cap[src, dim]
            windows, bounds = swap_limits(src, partner, ctx)
            stale = False
        if room <= 0:
            break
        # Every replica on the partner against this offer, at today's loads; the exact per-goal
        # screen runs on the first of what is left.
        net_d = offered_load[offer, dim] - held_cols[dim]
        data = (model.size[offered[offer]], held_size, ratio) if np.isfinite(ratio) else None
        passing = exchanges(offered_load[offer], net_d, room, data, held_cols, windows)
        if not len(passing):
            continue
        if goal.swaps_least_data:
            # The offer's bytes copied both ways (its size and the replica's it is exchanged for)
            # for a net transfer of the difference: the lightest exchange is the least data and
            # the most relief for this offer (at most the partner's room).
            key = -net_d[passing]
        else:
            # Aim the net transfer at half the gap (both end level), >= src's excess, <= room.
            want = min(max((model.load[src, dim] - model.load[partner, dim]) / 2, need), room)
            key = np.abs(net_d[passing] - want)
        cand = first_passing(passing, key, offered_load[offer], held_cols, bounds)
        for pick in cand.tolist():
            if rack is not None and not rack.accept(Move(REPLICA_MOVE, int(held[pick]), partner, src), model):
                continue
            move = Move(SWAP, int(offered[offer]), src, partner, int(held[pick]))
            if goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
                if model.size[offered[offer]] + held_size[pick] > wide * net_d[pick]:
                    model.wide_swaps += 1
                # Only the two swapped partitions changed: the partner holds the offer instead.
                held[pick] = offered[offer]
                held_cols[:, pick] = model.contrib(int(offered[offer]), partner)
                held_size[pick] = model.size[offered[offer]]
                stale = True
                break


def data_ratios(src: int, ctx: SearchContext) -> tuple[float, float]:
    """The most bytes a swap off ``src`` may copy per unit of its net relief (inf: any), and the
    most a capped traffic swap would (inf for the disk goal's, capped as they are).

    Data first: a disk swap copies at most the data slack over the least data its relief takes (the
    bytes moved plainly); where ``src`` sets the goal's figure, whose relief is balance, at most
    twice that. A traffic goal's, where capped (``SearchContext.swap_data_cap``): at most
    SWAP_DATA_CAP x the bytes a plain move of the same relief copies off ``src`` on average (its
    disk per unit of the goal's resource)."""
    model, goal = ctx.model, ctx.goal
    if goal.swaps_least_data:
        return (1.0 + ctx.data_slack) * (2.0 if goal.sets_figure(model, src) else 1.0), np.inf
    load = float(model.load[src, goal.dim])
    if load <= 0:
        return np.inf, np.inf
    wide = SWAP_DATA_CAP * float(model.load[src, DISK]) / load
    return (wide if ctx.swap_data_cap else np.inf), wide


def exchanges(
    offer_load: np.ndarray,
    net_d: np.ndarray,
    room: float,
    data: tuple[float, np.ndarray, float] | None,
    held_cols: np.ndarray,
    windows: dict[int, tuple[float, float]],
) -> np.ndarray:
    """The columns of ``held_cols`` (the partner's replicas, one row per dimension) whose exchange
    for the offer (``offer_load``) may pass, in index order: a net transfer ``net_d`` on the goal's
    dimension in (0, room]; with ``data`` (the offer's size, the replicas' sizes, the most data per
    unit of net transfer), bytes copied within that ratio; then per dimension the tightest goal's
    window (slightly widened), a cheap cut.

    No offer is held by the partner (both lists leave out partitions on the other broker, and a
    swap adds to the partner's list only the offer it just made): no exchange is of a partition
    with itself."""
    ok = (net_d > 0) & (net_d <= room)
    if data is not None:
        # Both replicas' bytes are copied for a relief of their difference: an exchange of near
        # equals copies many times what it relieves.
        size, held_size, ratio = data
        ok &= size + held_size <= ratio * net_d
    for other, (lo, hi) in windows.items():
        net_other = offer_load[other] - held_cols[other]
        ok &= (net_other <= hi) & (net_other >= lo)
    return np.flatnonzero(ok)


def first_passing(
    passing: np.ndarray, key: np.ndarray, offer_load: np.ndarray, held_cols: np.ndarray, bounds: SwapBounds
) -> np.ndarray:
    """The first SWAP_PICKS of ``passing`` (columns of ``held_cols``, one row per dimension;
    ``key`` ascending, ties in index order) whose exchange for the offer ``swap_screen`` passes:
    screened a few at a time in that order, as the whole ordered list filtered would give them."""
    m = 4 * SWAP_PICKS
    while True:
        first = passing[first_k(key, m)]
        picked: np.ndarray = first[swap_screen((offer_load[:, None] - held_cols[:, first]).T, bounds)][
            :SWAP_PICKS
        ]
        if len(picked) == SWAP_PICKS or m >= len(passing):
            return picked
        m *= 4


def first_k(key: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")[:k]`` without sorting all of ``key``: only the entries at
    most its k-th smallest value are sorted."""
    if len(key) <= k:
        return np.argsort(key, kind="stable")
    kth = np.partition(key, k - 1)[k - 1]
    few = np.flatnonzero(key <= kth)
    return few[np.argsort(key[few], kind="stable")][:k]
