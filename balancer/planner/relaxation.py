"""A second start for the goals: the least-data placement of the linear relaxation.

The goals search greedily, broker by broker and goal by goal; on some clusters the order they meet
the brokers in copies far more data than the brokers' final levels need (a receiver filled by one
goal sheds to the next; a disk goal takes a giant because the traffic floor blocks the rest). The
linear relaxation of "which replicas move where" sees every broker at once: fractions of replicas
leave their brokers and arrive on others, at the least data, keeping every broker within lines per
replica-borne resource (network_in above and below, disk above, replica counts): inside the goals'
bands and the capacity goals' ceilings, halfway from the band's edge to the average (a placement on
the edges leaves the goals after it no room to move), or where the first plan left a broker it
could not bring inside; and within the rack goal's spread.

A vertex of the relaxation is whole but for a few replicas (no more than its broker rows); they are
rounded, and the goals run from the rounded placement to finish: leadership, network_out, what
rounding left. The exact relaxation (``exact=True``) is a further start: where no placement meets
the inner lines (giants or racks in the way; the least violation of them is a placement far off some
line) it takes the band edges; where the vertex meets every line, the partitions it splits are
decided together as integers (a small mixed-integer problem over them alone: rounding at a half
breaks the lines where they are giants, which they often are); and its moves are applied in passes
(one refused while its destination is still full is tried again once the rest have made room).
Neither start wins everywhere: the goals that finish from a placement are greedy, so a placement
nearer the lines can still end in more data. ``plan`` tries the relaxation only where the first plan
copies more than the data slack over ``data_bound``, the exact one from the levels of the plan chosen
so far, and chooses among all the starts' plans at once (``planner._choose``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence

import numpy as np
import scipy.sparse as sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from .actions import Move
from .goals import Goal, ResourceGoal
from .model import DISK, IN, LEADERSHIP, NLEAD, NREP, REPLICA_MOVE, ClusterModel
from .search.cost import least_cover

# The relaxation's size (replica slots plus partition x broker arrivals) above which it is not
# tried: the simplex's time grows faster than the size, and past this a solve costs orders of
# magnitude more than the goals' own search (a fleet's clusters of thousands of partitions over
# dozens of brokers), while a window plans every cluster it closes.
MAX_VARIABLES = 100_000
# A line no placement meets (inner lines a heavy partition or a rack cannot reach, say) costs this
# much per unit of violation (parts per million of the line's resource; data costs parts per million
# of all data): the solve stays feasible, and the goals work from the nearest placement.
VIOLATION_COST = 1e4
PPM = 1e6
LINE_TOLERANCE = 1e-9  # a broker exactly at a line meets it
MIP_NODES = 1_000  # branch-and-bound nodes for the split partitions (a count, not a clock: the same answer)
_FD_SWAP = threading.Lock()  # guards the process-wide file descriptor 1 (``_stdout_to_stderr``)
SHRINK = 0.5  # the lines' share of the way from the average to the band's edge


def broker_lines(
    model: ClusterModel, levels: np.ndarray, goals: Sequence[Goal], *, shrink: float = SHRINK
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Per replica-borne dimension (network_in, disk, replica count) a goal watches: (dim, upper,
    lower) per broker in the dimension's units. Upper: the capacity goals' ceiling and the balance
    goals' band edge drawn SHRINK of the way in from the average, or the first plan's level
    (``levels``, model.load's shape) where that plan left the broker over the ceiling or the band.
    Lower likewise, from the bands alone."""
    lines = []
    for dim in (IN, DISK, NREP):
        ceiling = np.full(model.n_brokers, np.inf)
        band_up = np.full(model.n_brokers, np.inf)
        band_lo = np.full(model.n_brokers, -np.inf)
        watched = False
        for goal in goals:
            if isinstance(goal, ResourceGoal) and goal.dim == dim and not goal.idle(model):
                up, lo = goal.limits(model)
                if goal.hard:
                    ceiling = np.minimum(ceiling, up * model.cap[:, dim])
                else:
                    band_up = np.minimum(band_up, up * model.cap[:, dim])
                    band_lo = np.maximum(band_lo, lo * model.cap[:, dim])
                watched = True
        if not watched:
            continue
        level = levels[:, dim]
        mean = model.load[:, dim].sum() / model.cap[:, dim].sum() * model.cap[:, dim]
        inner_up = np.where(np.isfinite(band_up), mean + shrink * (band_up - mean), np.inf)
        inner_lo = np.where(np.isfinite(band_lo), mean + shrink * (band_lo - mean), -np.inf)
        upper = np.where(level > np.minimum(ceiling, band_up), level, np.minimum(ceiling, inner_up))
        lower = np.where(level < band_lo, level, inner_lo)
        lines.append((dim, upper * (1 + LINE_TOLERANCE), lower * (1 - LINE_TOLERANCE)))
    return lines


def fits(model: ClusterModel) -> bool:
    """The relaxation of ``model`` (replica slots plus partition x broker arrivals) is within
    MAX_VARIABLES (counting every movable partition as arriving anywhere): it is tried only where
    solving it costs less than the goals' own search."""
    slots = int(np.count_nonzero(model.replicas >= 0))
    return slots + int(np.count_nonzero(model.movable)) * model.n_brokers <= MAX_VARIABLES


def replica_slots(model: ClusterModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every replica as (partition, broker) arrays, and the partition x broker matrix of holders."""
    slot_p, slot_j = np.nonzero(model.replicas >= 0)
    slot_b = model.replicas[slot_p, slot_j]
    holds = np.zeros((model.n_partitions, model.n_brokers), dtype=bool)
    holds[slot_p, slot_b] = True
    return slot_p, slot_b, holds


def placement_moves(
    model: ClusterModel, levels: np.ndarray, goals: Sequence[Goal], *, exact: bool = False
) -> list[Move]:
    """The replica moves of the relaxation's rounded solution for ``model`` (today's placement)
    within the lines of ``levels`` (``broker_lines``); [] where the cluster is too large for it,
    nothing needs to move, or the solve fails. ``exact``: the band edges where the inner lines
    cannot all be met, and the split partitions decided as integers (``whole``) where the lines are
    met; otherwise the inner lines alone, each split replica rounded at a half."""
    if not fits(model):
        return []
    n = model.n_brokers
    slot_p, slot_b, holds = replica_slots(model)
    must_leave = model.drained[slot_b]
    free = model.movable[slot_p] | must_leave
    arrive = ~holds & model.movable[:, None] & model.dest_ok[None, :] & ~model.drained[None, :]
    arr_p, arr_b = np.nonzero(arrive)
    n_slots, n_arr = len(slot_p), len(arr_p)
    total = float(np.sum(model.size * model.rf))
    lines = broker_lines(model, levels, goals)
    # The band edges themselves (exact only): where the inner lines ask more than any placement
    # gives (giants or racks in the way), the least violation of them is a placement far off some
    # line; the edges leave the goals less room but a placement that meets them.
    edges = broker_lines(model, levels, goals, shrink=1.0) if exact else lines
    if not free.any() or not n_arr or total <= 0 or not lines:
        return []
    per_dim = {IN: model.bytes_in, DISK: model.size, NREP: np.ones(model.n_partitions)}
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    rhs: list[float] = []
    edge_rhs: list[float] = []
    slot_on = [np.flatnonzero(slot_b == b) for b in range(n)]
    arr_on = [np.flatnonzero(arr_b == b) for b in range(n)]
    n_viol = 0
    for (dim, upper, lower), (_, edge_up, edge_lo) in zip(lines, edges, strict=True):
        unit = max(float(model.load[:, dim].sum()), 1e-300) / PPM
        w = per_dim[dim] / unit
        load = model.load[:, dim] / unit
        for b in range(n):
            idx = np.concatenate([slot_on[b], n_slots + arr_on[b]])
            out_w, in_w = w[slot_p[slot_on[b]]], w[arr_p[arr_on[b]]]
            for sign, line, edge in ((1.0, upper[b], edge_up[b]), (-1.0, lower[b], edge_lo[b])):
                if not np.isfinite(line):
                    continue  # an edge is finite exactly where its inner line is
                # sign x (load - leaving + arriving) <= sign x line, less a violation variable
                rows.append(np.full(len(idx) + 1, len(rhs)))
                cols.append(np.concatenate([idx, [n_slots + n_arr + n_viol]]))
                vals.append(np.concatenate([-sign * out_w, sign * in_w, [-1.0]]))
                rhs.append(sign * (line / unit - load[b]))
                edge_rhs.append(sign * (edge / unit - load[b]))
                n_viol += 1
    racks = rack_rows(model, slot_p, slot_b, arr_p, arr_b, first_row=len(rhs))
    if racks is not None:
        rows.append(racks[0])
        cols.append(racks[1])
        vals.append(racks[2])
        rhs.extend(racks[3].tolist())
        edge_rhs.extend(racks[3].tolist())
    n_var = n_slots + n_arr + n_viol
    a_ub = sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(rhs), n_var)
    )
    # Per partition, as many replicas arrive as leave.
    eq_row = np.full(model.n_partitions, -1)
    eq_p = np.flatnonzero(model.movable | np.isin(np.arange(model.n_partitions), slot_p[must_leave]))
    eq_row[eq_p] = np.arange(len(eq_p))
    keep_s, keep_a = eq_row[slot_p] >= 0, eq_row[arr_p] >= 0
    a_eq = sparse.csr_matrix(
        (
            np.concatenate([-np.ones(int(keep_s.sum())), np.ones(int(keep_a.sum()))]),
            (
                np.concatenate([eq_row[slot_p][keep_s], eq_row[arr_p][keep_a]]),
                np.concatenate([np.flatnonzero(keep_s), n_slots + np.flatnonzero(keep_a)]),
            ),
        ),
        shape=(len(eq_p), n_var),
    )
    cost = np.concatenate(
        [model.size[slot_p] / total * PPM, np.zeros(n_arr), np.full(n_viol, VIOLATION_COST)]
    )
    lo = np.zeros(n_var)
    hi = np.ones(n_var)
    hi[n_slots + n_arr :] = np.inf
    hi[:n_slots][~free] = 0.0
    lo[:n_slots][must_leave] = 1.0
    bounds = np.column_stack([lo, hi])
    rhss = (np.array(rhs), np.array(edge_rhs)) if exact else (np.array(rhs),)
    solved = vertex(cost, a_ub, rhss, a_eq, bounds, first_line=n_slots + n_arr)
    if solved is None:
        return []
    x, b_ub, met = solved
    if exact and met:
        x = whole(x, cost, a_ub, b_ub, a_eq, lo, hi, slot_p, arr_p, n_slots, n_arr)
    leave = x[:n_slots] >= 0.5
    land = x[n_slots : n_slots + n_arr] >= 0.5
    arrivals: dict[int, list[int]] = {}
    for p, b in zip(arr_p[land].tolist(), arr_b[land].tolist(), strict=True):
        arrivals.setdefault(p, []).append(b)
    departures: dict[int, list[int]] = {}
    for p, b in zip(slot_p[leave].tolist(), slot_b[leave].tolist(), strict=True):
        departures.setdefault(p, []).append(b)
    moves: list[Move] = []
    for p, srcs in departures.items():
        dsts = arrivals.get(p, [])
        if len(dsts) != len(srcs):
            continue  # rounding split this partition's moves: the goals decide it
        for src in srcs:
            # Same rack first: the partition keeps the racks it spans at every step.
            same = [d for d in dsts if model.rack[d] == model.rack[src]]
            dst = (same or dsts)[0]
            dsts.remove(dst)
            moves.append(Move(REPLICA_MOVE, p, src, dst))
    return moves


def vertex(
    cost: np.ndarray,
    a_ub: sparse.csr_matrix,
    rhss: Sequence[np.ndarray],
    a_eq: sparse.csr_matrix,
    bounds: np.ndarray,
    *,
    first_line: int,
) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The least-cost vertex within the first right-hand side of ``rhss`` whose lines it meets (the
    violation columns from ``first_line`` all zero), else within the first one: (x, its right-hand
    side, whether it meets every line); None where a solve fails."""
    kept = None
    for b_ub in rhss:
        res = linprog(
            cost,
            A_ub=a_ub,
            b_ub=b_ub,
            A_eq=a_eq,
            b_eq=np.zeros(a_eq.shape[0]),
            bounds=bounds,
            method="highs-ds",  # dual simplex: a vertex, and the same one for the same input
        )
        if res.status != 0 or res.x is None:
            break
        met = not np.any(res.x[first_line:] > LINE_TOLERANCE * PPM)
        if met:
            return res.x, b_ub, met
        if kept is None:
            kept = res.x, b_ub, met
    return kept


def whole(
    x: np.ndarray,
    cost: np.ndarray,
    a_ub: sparse.csr_matrix,
    b_ub: np.ndarray,
    a_eq: sparse.csr_matrix,
    lo: np.ndarray,
    hi: np.ndarray,
    slot_p: np.ndarray,
    arr_p: np.ndarray,
    n_slots: int,
    n_arr: int,
) -> np.ndarray:
    """The vertex ``x`` made whole: the replicas it leaves whole stay fixed, and the partitions it
    splits are decided together as integers (a small mixed-integer problem over their replicas
    alone), at the least violation of the lines and then data. Rounding each at a half instead
    breaks the lines where the split replicas are giants, which they often are (a giant is the
    finest lever the relaxation has left on a broker). ``x`` rounded where that solve fails."""
    n_var = len(x)
    split = np.zeros(n_var, dtype=bool)
    split[: n_slots + n_arr] = (x[: n_slots + n_arr] > 1e-6) & (x[: n_slots + n_arr] < 1 - 1e-6)
    if not split.any():
        return x
    parts = np.union1d(slot_p[split[:n_slots]], arr_p[split[n_slots : n_slots + n_arr]])
    free = np.zeros(n_var, dtype=bool)
    free[:n_slots] = np.isin(slot_p, parts)
    free[n_slots : n_slots + n_arr] = np.isin(arr_p, parts)
    fixed = np.round(x)
    lo2 = np.where(free, lo, fixed)
    hi2 = np.where(free, hi, fixed)
    lo2[n_slots + n_arr :] = 0.0  # the violations follow
    hi2[n_slots + n_arr :] = np.inf
    integral = np.zeros(n_var, dtype=np.uint8)
    integral[: n_slots + n_arr] = 1
    with _stdout_to_stderr():
        res = milp(
            cost,
            integrality=integral,
            bounds=Bounds(lo2, hi2),
            constraints=[LinearConstraint(a_ub, -np.inf, b_ub), LinearConstraint(a_eq, 0.0, 0.0)],
            options={"node_limit": MIP_NODES},
        )
    if res.x is None:
        return x
    return np.asarray(res.x)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 goes to 2 for the block. HiGHS's MIP solver can write a stray line to the
    process's stdout, whatever its display option says (ERGO-Code/HiGHS#2783); stdout is the
    operator's console, and stderr is where library output belongs (the log file under Spark). One
    block at a time per process: two threads interleaving would each restore the other's swap, and
    stdout would stay on stderr."""
    with _FD_SWAP:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            os.dup2(2, 1)
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def rack_rows(
    model: ClusterModel,
    slot_p: np.ndarray,
    slot_b: np.ndarray,
    arr_p: np.ndarray,
    arr_b: np.ndarray,
    *,
    first_row: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The rack goal's rows (row, column, value, right-hand side), per partition and rack: one that
    spans a rack per replica keeps at most one replica on each rack (or as many as it has there
    now); one with more replicas than racks keeps every rack it spans. None where racks do not
    count."""
    if not model.rack_aware or model.n_live_racks < 2:
        return None
    n_racks = int(model.rack.max()) + 1
    n_slots = len(slot_p)
    key_s = slot_p * n_racks + model.rack[slot_b]
    key_a = arr_p * n_racks + model.rack[arr_b]
    count = np.bincount(key_s, minlength=model.n_partitions * n_racks).astype(np.float64)
    spread = model.rf <= model.n_live_racks  # one replica per rack
    # Upper rows where the partition spreads (count - leaving + arriving <= max(1, count)), lower
    # rows where it has more replicas than racks (leaving - arriving <= count - min(1, count)).
    sign = np.where(np.repeat(spread, n_racks), 1.0, -1.0)
    bound = np.where(sign > 0, np.maximum(1.0, count) - count, count - np.minimum(1.0, count))
    keys = np.unique(key_a)  # only a rack something may arrive on binds
    row_of = np.full(model.n_partitions * n_racks, -1)
    row_of[keys] = first_row + np.arange(len(keys))
    used_s = row_of[key_s] >= 0
    rows = np.concatenate([row_of[key_s][used_s], row_of[key_a]])
    cols = np.concatenate([np.flatnonzero(used_s), n_slots + np.arange(len(arr_p))])
    vals = np.concatenate([-sign[key_s][used_s], sign[key_a]])
    return rows, cols, vals, bound[keys]


def data_bound(model: ClusterModel, levels: np.ndarray, goals: Sequence[Goal]) -> float:
    """The least data (bytes) any plan copies to leave every broker within the goals' bands or where
    the first plan (``levels``) left it, whichever is looser, counted broker by broker: the replicas
    leaving a broker over its network_in or disk line carry at least its excess (the cheaper cover
    of the two, per broker, by ``least_cover``), those arriving on one under its network_in line at
    least its deficit; every byte copied leaves one broker and arrives on one."""
    leave = np.zeros(model.n_brokers)
    arrive = 0.0
    for dim, upper, lower in broker_lines(model, levels, goals, shrink=1.0):
        if dim == NREP:
            continue
        relief = model.bytes_in if dim == IN else model.size
        for b in np.flatnonzero(model.load[:, dim] > upper).tolist():
            ps = model.partitions_on(b)
            ps = ps[model.movable[ps]]
            need = float(model.load[b, dim] - upper[b])
            leave[b] = max(leave[b], least_cover(model.size[ps], relief[ps], need))
        under = np.flatnonzero(model.load[:, dim] < lower).tolist() if dim == IN else []
        if under:
            holds = replica_slots(model)[2]
            for b in under:
                away = ~holds[:, b] & model.movable
                need = float(lower[b] - model.load[b, dim])
                arrive += least_cover(model.size[away], relief[away], need)
    bound = max(float(leave.sum()), arrive)
    return bound if np.isfinite(bound) else 0.0


def relax(model: ClusterModel, levels: np.ndarray, goals: Sequence[Goal], *, exact: bool = False) -> int:
    """Apply the relaxation's moves to ``model`` where no hard goal vetoes them; how many applied.
    ``exact``: the placement of ``placement_moves(exact=True)``, which holds only as a whole, its
    moves in no order: one a capacity goal refuses because its destination is still full is tried
    again after the rest, in passes until one applies none (otherwise one pass). A leader's replica
    first hands its leadership to the partition's replica on the broker leading the fewest that the
    hard goals let take it: the moves keep the leader counts the goals balance."""
    hard = [g for g in goals if g.hard]
    applied = 0
    pending = placement_moves(model, levels, goals, exact=exact)
    while pending:
        refused = []
        for move in pending:
            if model.leader[move.p] == move.src:
                row = model.replicas[move.p]
                others = row[(row >= 0) & (row != move.src)]
                for heir in others[np.argsort(model.load[others, NLEAD], kind="stable")].tolist():
                    if Goal.try_move(Move(LEADERSHIP, move.p, move.src, heir), model, hard):
                        break
            if Goal.try_move(move, model, hard):
                applied += 1
            else:
                refused.append(move)
        if not exact or len(refused) == len(pending):
            break
        pending = refused
    return applied
