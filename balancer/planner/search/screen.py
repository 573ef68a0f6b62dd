"""Vectorized screens: which candidate moves every limit of the optimized resource goals admits.

Each screen uses the arithmetic of the scalar checks with its limits loosened by SCREEN_SLACK, so a
candidate it rejects is one the scalar checks reject: skipping it cannot change a plan.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .constants import (
    EPS,
    SCREEN_SLACK,
)
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


def source_ok(a: int, vec: np.ndarray, ctx: SearchContext) -> bool:
    """Moving a replica that carries ``vec`` off ``a`` takes ``a`` under no other resource goal's
    lower limit."""
    model, goal = ctx.model, ctx.goal
    for g in ctx.res_goals:
        v = vec.item(g.dim)
        if v > 0 and g is not goal:
            _, lower = g.limits(model)
            if (model.load.item(a, g.dim) - v) / model.cap.item(a, g.dim) < lower.item(a) - EPS:
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


def swap_windows(a: int, b: int, ctx: SearchContext) -> dict[int, tuple[float, float]]:
    """Per dimension: (lo, hi) such that a transfer n from a to b outside [lo, hi] fails some
    goal's ``swap_screen`` (its inequalities solved for n, widened by 1e-9 relative)."""
    model = ctx.model
    load, cap = model.load, model.cap
    windows: dict[int, list[float]] = {}
    for g in ctx.res_goals:
        upper, lower = g.limits(model)
        dim = g.dim
        tol = EPS
        # Python floats (``item``): numpy's arithmetic, without its cost per scalar.
        ua, ub, la, lb = upper.item(a), upper.item(b), lower.item(a), lower.item(b)
        ca, cb, xa, xb = cap.item(a, dim), cap.item(b, dim), load.item(a, dim), load.item(b, dim)
        hi = min((ub + tol) * cb - xb, xa - (la - tol) * ca)
        lo = -min((ua + tol) * ca - xa, xb - (lb - tol) * cb)
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
    return out


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


def swap_bounds(a: int, b: int, ctx: SearchContext) -> SwapBounds:
    model = ctx.model
    load, cap = model.load, model.cap
    cols = []
    for g in ctx.res_goals:
        upper, lower = g.limits(model)
        dim = g.dim
        tol = EPS
        ca, cb = cap.item(a, dim), cap.item(b, dim)
        cols.append(
            (
                dim,
                load.item(a, dim),
                load.item(b, dim),
                (upper.item(a) + tol) * ca,
                (upper.item(b) + tol) * cb,
                (lower.item(a) - tol) * ca,
                (lower.item(b) - tol) * cb,
            )
        )
    dims, *rest = (np.array(col) for col in zip(*cols, strict=True))
    return SwapBounds(dims.astype(np.int64), *rest)


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
