"""Data first, moves second: a shed or fill minimises data + cost x moves, with the largest per-move
cost whose data stays within ``slack`` (PlannerOptions.data_slack) of the least its candidates need."""

from __future__ import annotations

import numpy as np

from .constants import COST_LADDER, COST_STEP, NEGLIGIBLE_RELIEF


def cover_data(size: np.ndarray, relief: np.ndarray, need: float) -> float:
    """Data a shed in this order copies to relieve ``need``: candidates in turn until the next one
    would reach it, then the smallest of the rest that reaches it alone (inf if none does)."""
    if need <= 0:
        return 0.0
    got = np.cumsum(relief)
    k = int(np.searchsorted(got, need))
    if k >= len(size):
        return float("inf")
    short = need - (float(got[k - 1]) if k else 0.0)
    rest = size[k:][relief[k:] >= short]
    return float(size[:k].sum() + rest.min()) if len(rest) else float("inf")


def least_data(size: np.ndarray, relief: np.ndarray, need: float) -> float:
    """The least data any set of these candidates copies to relieve ``need`` (the fractional cover:
    a lower bound; inf if all of them do not reach it)."""
    if need <= 0:
        return 0.0
    # Bytes copied per byte relieved; a candidate relieving nothing goes last.
    ratio = np.full(len(size), np.inf)
    np.divide(size, relief, out=ratio, where=relief > 0)
    order = np.argsort(ratio, kind="stable")
    got = np.cumsum(relief[order])
    k = int(np.searchsorted(got, need))
    if k >= len(order):
        return float("inf")
    short = need - (float(got[k - 1]) if k else 0.0)
    return float(size[order][:k].sum() + size[order][k] * short / relief[order][k])


def least_cover(size: np.ndarray, relief: np.ndarray, need: float) -> float:
    """The least data any set of these candidates copies to relieve ``need``, as a bound that sees
    whole replicas: the smallest that relieves it alone, or the fractional cover by the smaller
    ones, whichever is less (a set holds one of the first kind or only the second)."""
    covers = relief >= need
    single = float(size[covers].min()) if covers.any() else float("inf")
    return min(single, least_data(size[~covers], relief[~covers], need))


def affordable(size: np.ndarray, relief: np.ndarray, need: float, slack: float) -> np.ndarray:
    """Per candidate: not one that alone covers ``need`` with more than ``slack`` over the least
    data (a data-first shed passes such a giant over; ranked by relief per move it would come
    first at every cost)."""
    least = least_data(size, relief, need)
    ok: np.ndarray = (relief < need) | (size <= (1.0 + slack) * least)
    return ok


def negligible_giants(size: np.ndarray, relief: np.ndarray, need: float, slack: float) -> np.ndarray:
    """Per candidate: one that relieves less than NEGLIGIBLE_RELIEF of ``need`` and alone copies
    more than ``slack`` over the least data for all of it (a cold giant: its bytes buy no relief,
    whether or not the search puts data first). Small cold replicas stay candidates."""
    tiny: np.ndarray = relief < NEGLIGIBLE_RELIEF * need
    if not tiny.any():
        return tiny
    giant: np.ndarray = tiny & beyond_whole(size, relief, need, slack)
    return giant


def beyond_whole(size: np.ndarray, relief: np.ndarray, whole: float, slack: float) -> np.ndarray:
    """Per candidate: one that alone copies more than ``slack`` over the least data for ``whole``,
    all its broker must lose in the end (a giant that takes the broker far below that line and
    puts about as much again above a receiver's, which then sheds it)."""
    if whole <= 0 or not len(size):
        return np.zeros(len(size), dtype=bool)
    least = least_data(size, np.minimum(relief, whole), whole)
    giant: np.ndarray = size > (1.0 + slack) * least
    return giant


def move_cost(
    size: np.ndarray, relief: np.ndarray, need: float, ceiling: float, slack: float, floor: float = 0.0
) -> float:
    """The per-move cost (bytes) to rank candidates by, relief / (size + cost): the largest of
    ``ceiling`` divided by COST_STEP up to COST_LADDER times whose order copies at most
    1 + ``slack`` times the least data, else the smallest (a move is never free: the last few %
    of data would take thousands of tiny moves). ``relief`` is what each relieves of ``need``
    (capped at it: relief beyond the need is worth nothing). ``floor``: data the shed may copy
    at no charge whatever the least is (bytes another goal must move off the broker anyway)."""
    if need <= 0 or not len(size) or ceiling <= 0:
        return ceiling
    least = least_data(size, relief, need)
    if not np.isfinite(least):
        return ceiling
    within = (1.0 + slack) * max(least, floor)
    for j in range(COST_LADDER + 1):
        cost = ceiling / COST_STEP**j
        order = np.argsort(-relief / (size + cost), kind="stable")
        if cover_data(size[order], relief[order], need) <= within:
            return cost
    return cost
