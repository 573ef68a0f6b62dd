"""Vectorized screens: which candidate moves every limit of the optimized resource goals admits.

Each screen uses the arithmetic of the scalar checks with its limits loosened by SCREEN_SLACK, so a
candidate it rejects is one the scalar checks reject: skipping it cannot change a plan.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..model import DISK
from .constants import DEST_TRIES, EPS, SCREEN_SLACK, WALK_LIMIT
from .context import SearchContext


def dest_mask(p: int, a: int, vec: np.ndarray, ctx: SearchContext) -> np.ndarray:
    model = ctx.model
    mask = model.dest_ok.copy()
    row = model.replicas[p]
    mask[row[row >= 0]] = False
    for g in ctx.res_goals:
        v = vec.item(g.dim)
        if v > 0:
            mask &= (model.load[:, g.dim] + v) <= g.load_ceiling(model)
    if ctx.rack is not None:
        rm = ctx.rack.dest_mask(model, p, a)
        if rm is not None:
            mask &= rm
    return mask


def first_dests(p: int, a: int, vec: np.ndarray, ctx: SearchContext, *, to_short: bool) -> list[int] | None:
    """The destinations ``move.move_out`` tries for p's replica on ``a`` (carrying ``vec``): the
    first DEST_TRIES of ``dest_mask`` (with ``to_short``, brokers under the goal's lower limit)
    coldest first on the goal's dimension; for a goal that prefers disk room, those whose disk stays
    within the disk line first. The same scalar arithmetic as ``dest_mask``, broker by broker along
    ``ClusterModel.coldest`` (for disk room, among the brokers within the line before the move: a
    replica's bytes only add to a disk), where the first few usually settle it. None where
    WALK_LIMIT brokers do not, or the brokers within the disk line are too few (the caller builds
    the masks)."""
    model, goal = ctx.model, ctx.goal
    disk = goal.prefers_disk_room
    if disk:
        line, v_disk, cap = ctx.disk_line + EPS, vec.item(DISK), model.cap
        if v_disk < 0:
            return None
        keys = model.coldest(goal.dim, (DISK, line))
    else:
        keys = model.coldest(goal.dim)
    if keys is None:
        return None
    refused: set[int] = set()
    if ctx.rack is not None:
        racks = ctx.rack.refused_racks(model, p, a)
        if racks is None:  # no destination keeps the partition's racks
            return []
        refused = racks
    ceilings = ctx.dest_ceilings()
    limits = [(d, v, ceilings[d]) for d, v in enumerate(vec.tolist()) if v > 0 and d in ceilings]
    rack, item, held, dim = model.rack_of, model.load.item, model.replicas[p].tolist(), goal.dim
    if to_short:
        _, lower, short_cap = goal.scalar_limits(model)
    first: list[int] = []
    for n, (_, b) in enumerate(keys):
        if n == WALK_LIMIT:
            return None
        if b in held or rack[b] in refused:
            continue
        if to_short and not item(b, dim) < lower[b] * short_cap[b]:
            continue
        for d, v, ceiling in limits:
            if not item(b, d) + v <= ceiling[b]:
                break
        else:
            if disk and (item(b, DISK) + v_disk) / cap.item(b, DISK) > line:
                continue
            first.append(b)
            if len(first) == DEST_TRIES:
                return first
    # Every broker walked: too few within the disk line, and those over it come next.
    return None if disk else first


def source_ok(a: int, vec: np.ndarray, ctx: SearchContext) -> bool:
    """Moving a replica that carries ``vec`` off ``a`` takes ``a`` under no other resource goal's
    lower limit."""
    model, goal = ctx.model, ctx.goal
    for g in ctx.res_goals:
        v = vec.item(g.dim)
        if v > 0 and g is not goal:
            _, lower, cap = g.scalar_limits(model)
            if (model.load.item(a, g.dim) - v) / cap[a] < lower[a] - EPS:
                return False
    return True


def source_ok_many(a: int, vecs: np.ndarray, ctx: SearchContext) -> np.ndarray:
    """``source_ok`` for many replicas on ``a`` (rows of ``vecs``), its limits loosened by
    SCREEN_SLACK: False only where ``source_ok`` is False too."""
    model, goal = ctx.model, ctx.goal
    ok = np.ones(len(vecs), dtype=bool)
    for g in ctx.res_goals:
        if g is goal:
            continue
        v = vecs[:, g.dim]
        _, lower = g.limits(model)
        ok &= ~((v > 0) & ((model.load[a, g.dim] - v) / model.cap[a, g.dim] < lower[a] - EPS - SCREEN_SLACK))
    return ok


class SwapBounds(NamedTuple):
    """Per optimized resource goal (one column each), the loads of a swap's two brokers ``a`` and
    ``b`` on its dimension and the bounds its ``accept`` holds them to: ``swap_screen``'s inputs,
    fixed until a move changes either broker's load."""

    dims: np.ndarray
    load_a: np.ndarray
    load_b: np.ndarray
    upper_a: np.ndarray  # (upper + tol) * cap: the most a may carry
    upper_b: np.ndarray
    lower_a: np.ndarray  # (lower - tol) * cap: the least a may carry
    lower_b: np.ndarray


def swap_limits(a: int, b: int, ctx: SearchContext) -> tuple[dict[int, tuple[float, float]], SwapBounds]:
    """For a swap between brokers ``a`` and ``b``: per dimension, the window (lo, hi) outside which a
    transfer n from a to b fails some goal's ``swap_screen`` (its inequalities solved for n, widened
    by 1e-9 relative); and the ``SwapBounds`` that screen reads. Both from one reading of each
    optimized goal's limits."""
    model = ctx.model
    load = model.load
    cols = []
    windows: dict[int, list[float]] = {}
    for g in ctx.res_goals:
        upper, lower, caps = g.scalar_limits(model)
        dim = g.dim
        tol = EPS
        # Python floats: numpy's arithmetic, without its cost per scalar.
        ca, cb, xa, xb = caps[a], caps[b], load.item(a, dim), load.item(b, dim)
        top_a, top_b = (upper[a] + tol) * ca, (upper[b] + tol) * cb
        floor_a, floor_b = (lower[a] - tol) * ca, (lower[b] - tol) * cb
        cols.append((dim, xa, xb, top_a, top_b, floor_a, floor_b))
        hi = min(top_b - xb, xa - floor_a)
        lo = -min(top_a - xa, xb - floor_b)
        w = windows.setdefault(dim, [-math.inf, math.inf])
        w[0], w[1] = max(w[0], min(lo, 0.0)), min(w[1], max(hi, 0.0))
    out = {}
    for dim, (lo, hi) in windows.items():
        widen = (
            1e-9
            * (
                abs(load.item(a, dim))
                + abs(load.item(b, dim))
                + abs(lo if math.isfinite(lo) else 0)
                + abs(hi if math.isfinite(hi) else 0)
            )
            + 1e-300
        )
        out[dim] = (lo - widen, hi + widen)
    dims, *rest = (np.array(col) for col in zip(*cols, strict=True))
    return out, SwapBounds(dims.astype(np.int64), *rest)


def swap_screen(n: np.ndarray, bounds: SwapBounds) -> np.ndarray:
    """Per candidate (rows of ``n``, the load transferred from a to b per dimension): the transfer
    keeps every optimized resource goal's limits (``accept`` on each, vectorized)."""
    t = n[:, bounds.dims]
    to_b = (bounds.load_b + t <= bounds.upper_b) & (bounds.load_a - t >= bounds.lower_a)
    to_a = (bounds.load_a - t <= bounds.upper_a) & (bounds.load_b + t >= bounds.lower_b)
    return np.asarray(np.where(t > 0, to_b, np.where(t < 0, to_a, True)).all(axis=1))


def screen(ctx: SearchContext, src: np.ndarray | int, dst: np.ndarray | int, vec: np.ndarray) -> np.ndarray:
    """Per candidate move taking ``vec[i]`` (>= 0 per dimension) from ``src[i]`` to ``dst`` (one
    broker, or one per candidate): False
    only where ``fits``, ``improves`` or a resource goal's ``accept`` rejects it too.

    The same arithmetic as the scalar ctx.checks, with limits loosened by SCREEN_SLACK, so a
    candidate it rejects is one the scalar ctx.checks reject: skipping it cannot change a plan.
    """
    model, goal = ctx.model, ctx.goal
    load, cap, d = model.load, model.cap, goal.dim
    src = np.asarray(src)
    ok = np.ones(len(vec), dtype=bool)
    for g in ctx.res_goals:
        v = vec[:, g.dim]
        upper, lower = g.limits(model)
        tol = EPS * np.maximum(1.0, np.abs(upper[dst])) - g.margin + SCREEN_SLACK
        ok &= (v == 0) | (
            ((load[dst, g.dim] + v) / cap[dst, g.dim] <= upper[dst] + tol)
            & ((load[src, g.dim] - v) / cap[src, g.dim] >= lower[src] - tol)
        )
    v = vec[:, d]
    upper, lower = goal.limits(model)
    fit_b = np.where(v > 0, dst, src)
    ok &= (load[fit_b, d] + v) / cap[fit_b, d] <= upper[fit_b] + EPS + SCREEN_SLACK
    ls, lt = load[src, d], load[dst, d]

    def term(b: np.ndarray | int, x: np.ndarray) -> np.ndarray:
        u = x / cap[b, d]
        excess: np.ndarray = np.maximum(u - upper[b], 0.0) + np.maximum(lower[b] - u, 0.0)
        return excess

    before = term(src, ls) + term(dst, lt)
    after = term(src, ls - v) + term(dst, lt + v)
    ok &= (v != 0) & (before - after >= goal.min_gain_array(model, before) - SCREEN_SLACK)
    return ok
