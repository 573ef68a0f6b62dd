"""Leadership transfers: shedding and filling by leadership, chains of two transfers, swaps of two."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..actions import Move
from ..model import LBIN, NLEAD, OUT, ClusterModel
from .constants import (
    CHAIN_TRIES,
    COUNT_LP_GAP,
    COUNT_LP_NODES,
    COUNT_LP_SLOTS,
    EPS,
    HAND_OFF_DEPTH,
    HAND_OFF_HEADS,
    LEADERSHIP,
    LP_MAX_SLOTS,
    LP_NODES,
    LP_PREFERRED,
    LP_VIOLATION,
    LP_WHOLE,
    SCREEN_CHUNK,
    SCREEN_FIRST,
    SWAP_LEADERSHIPS,
)
from .context import SearchContext
from .screen import screen

if TYPE_CHECKING:
    from ..goals.resource import ResourceGoal


def shed_leaderships(a: int, ctx: SearchContext) -> None:
    """Hand leaderships off ``a`` while it is over its limit: to a follower with room, else (where
    the goal chains) by a chain of two transfers."""
    model, goal = ctx.model, ctx.goal
    ps = np.nonzero((model.leader == a) & model.movable & (model.rf > 1))[0]
    # Leaderships ``a`` holds but does not prefer go first: they return by election alone.
    ps = ps[np.lexsort((goal.leadership_key(model, ps), model.orig_replicas[ps, 0] == a))]
    util = model.util(goal.dim)
    chains = 0
    led: dict[int, np.ndarray] = {}
    i, n, misses, chunk = 0, len(ps), 0, 0
    while i < n:
        if not goal.over(model, a):
            return
        if misses >= SCREEN_FIRST and (not goal.chains_leadership or chains >= CHAIN_TRIES):
            # A leadership none of whose followers passes the screen is refused by the
            # scalar ctx.checks too, and (no chain left to try) changes nothing: skip it.
            chunk = max(chunk, SCREEN_FIRST)
            cand = ps[i : i + chunk]
            rows = model.replicas[cand]
            follower = (rows >= 0) & (rows != a) & model.dest_ok[np.maximum(rows, 0)]
            kk, jj = np.nonzero(follower)
            vec = np.zeros((len(kk), model.load.shape[1]))
            vec[:, OUT], vec[:, LBIN], vec[:, NLEAD] = (
                model.leader_out[cand[kk]],
                model.bytes_in[cand[kk]],
                1.0,
            )
            passed = np.zeros(len(cand), dtype=bool)
            passed[kk[screen(ctx, np.full(len(kk), a), rows[kk, jj], vec)]] = True
            hits = np.flatnonzero(passed)
            if not len(hits):
                chains += len(cand)
                i += len(cand)
                chunk = min(4 * chunk, SCREEN_CHUNK)
                continue
            if hits[0] < SCREEN_FIRST // 4:
                misses, chunk = 0, 0  # not skipping much here: one by one again
            chains += int(hits[0])
            i += int(hits[0])
        p = int(ps[i])
        i += 1
        row = model.replicas[p]
        followers = [b for b in row.tolist() if b >= 0 and b != a and model.dest_ok[b]]
        # The preferred replica first: handing leadership back needs only an election.
        preferred = model.orig_replicas[p, 0]
        followers.sort(key=lambda b: (b != preferred, util[b], b))
        for f in followers:
            move = Move(LEADERSHIP, p, a, f)
            if goal.fits(move, model) and goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
                util = model.util(goal.dim)
                misses, chunk = 0, 0
                break
        else:
            misses += 1
            if (
                goal.chains_leadership
                and chains < CHAIN_TRIES
                and chain_leadership(p, a, followers, led, ctx)
            ):
                util = model.util(goal.dim)
                misses, chunk = 0, 0
            chains += 1


def chain_leadership(
    p: int, a: int, followers: list[int], led: dict[int, np.ndarray], ctx: SearchContext
) -> bool:
    """Hand ``p``'s leadership to a follower ``f`` that lacks room for it, after ``f`` hands
    one of its own leaderships (the lightest that makes the room) on to a broker with room.

    Two transfers, no data: on a heavy-tailed cluster the heavy leaderships of the hottest
    broker mostly have hot followers, and without this only its many light ones could go
    (thousands of transfers where a few dozen pairs do). Undone unless both pass every goal.
    """
    model, goal = ctx.model, ctx.goal
    d = goal.dim
    upper, lower = goal.limits(model)
    lo_p = float(goal.relief(model, np.array([p]), a)[0])
    for f in followers:
        overflow = model.load[f, d] + lo_p - upper[f] * model.cap[f, d]
        if overflow <= 0:
            continue  # a plain transfer was refused for another reason
        if f not in led:
            led[f] = np.nonzero((model.leader == f) & model.movable & (model.rf > 1))[0]
        qs = led[f]
        qs = qs[(model.leader[qs] == f) & (qs != p)]
        if not len(qs):
            continue
        lo_q = goal.relief(model, qs, f)
        best = None
        for j in range(model.replicas.shape[1]):
            g = model.replicas[qs, j]
            gi = np.maximum(g, 0)
            ok = (
                (g >= 0)
                & (g != f)
                & (g != a)
                & model.dest_ok[gi]
                & (lo_q >= overflow)
                & (model.load[gi, d] + lo_q <= upper[gi] * model.cap[gi, d])
                & (model.load[f, d] + lo_p - lo_q >= lower[f] * model.cap[f, d])
            )
            if ok.any():
                # A receiver under its lower limit first (the transfer fills it too), then the
                # lightest leadership that makes the room.
                warm = (model.load[gi, d] >= lower[gi] * model.cap[gi, d]).astype(np.float64)
                k = int(np.lexsort((lo_q, warm, ~ok))[0])
                rank = (warm[k], float(lo_q[k]))
                if best is None or rank < best[0]:
                    best = (rank, int(qs[k]), int(g[k]))
        if best is None:
            continue
        _, q, g = best
        # f may dip under this goal's lower limit between the two transfers (not after them:
        # see ``ok``), so the first one answers to the other goals only.
        if not goal.try_move(Move(LEADERSHIP, q, f, g), model, tuple(c for c in ctx.checks if c is not goal)):
            continue
        move = Move(LEADERSHIP, p, a, f)
        if goal.fits(move, model) and goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
            return True
        model.apply(Move(LEADERSHIP, q, g, f))  # undo: the pair only counts together
    return False


def hand_off_heavy(a: int, ctx: SearchContext, *, depth: int = 0, held: int = -1, back: int = -1) -> None:
    """Hand one of the heaviest leaderships of ``a`` (over its limit and setting the goal's figure) to
    a follower with no room for it, which then sheds lighter leaderships to brokers with room; ``a``
    takes light leaderships back where the hand-off leaves it under its lower limit (``hand_off``).

    Leadership transfers only, no data: a broker leading two heavy partitions, no follower of either
    with room, keeps the figure above the bound otherwise, or the goal copies replicas for it. The
    HAND_OFF_HEADS lightest leaderships that alone cover a's excess (else the heaviest) are tried.
    Nested (``depth`` > 0), ``a`` is a receiver still over its limit after its shed: it hands on one
    of its own, not the leadership ``held`` it just took, and not back to ``back``, where it came from.
    """
    model, goal = ctx.model, ctx.goal
    d = goal.dim
    ps = np.nonzero((model.leader == a) & model.movable & (model.rf > 1))[0]
    ps = ps[ps != held]
    if not len(ps):
        return
    relief = goal.relief(model, ps, a)
    upper, _ = goal.limits(model)
    covering = relief >= model.load[a, d] - upper[a] * model.cap[a, d]
    order = np.lexsort((np.where(covering, relief, -relief), ~covering))
    for p in ps[order][:HAND_OFF_HEADS].tolist():
        if not goal.over(model, a) or (depth == 0 and not goal.sets_figure(model, a)):
            return
        row = model.replicas[p]
        util = model.util(d)
        followers = [b for b in row.tolist() if b >= 0 and b not in (a, back) and model.dest_ok[b]]
        followers.sort(key=lambda b: util[b])
        for f in followers:
            if hand_off(p, a, f, ctx, depth=depth):
                break


def hand_off(p: int, a: int, f: int, ctx: SearchContext, *, depth: int = 0) -> bool:
    """Transfer ``p``'s leadership ``a`` -> ``f``, shed ``f`` back under its limit by leadership
    transfers (chains of two included; where that is not enough, and the hand-offs nest less than
    HAND_OFF_DEPTH deep, ``f`` hands one of its own heavy leaderships on the same way), and fill
    ``a`` if it went under its lower limit. Counts as a whole: kept only if ``f`` ends within its
    limit, the higher of the two below where ``a`` was, this goal's metric fell and no other checked
    goal's got worse (a partial hand-off leaves the later goals a different cluster for a figure
    hardly lower, and they copy more data for it). True if kept."""
    model, goal = ctx.model, ctx.goal
    move = Move(LEADERSHIP, p, a, f)
    if not ctx.opens(move):
        return False
    top = float(model.util(goal.dim)[a])
    before = ctx.metrics()
    mark, swapped = len(model.log), set(model.swapped)
    model.apply(move)
    shed_leaderships(f, ctx)
    if depth < HAND_OFF_DEPTH and goal.over(model, f):
        hand_off_heavy(f, ctx, depth=depth + 1, held=p, back=a)
    if goal.under(model, a):
        fill_leaderships(a, ctx)
    util = model.util(goal.dim)
    if not goal.over(model, f) and max(util[a], util[f]) < top - EPS and ctx.better(before):
        return True
    model.undo_to(mark, swapped)
    return False


def swap_leadership(a: int, ctx: SearchContext) -> None:
    """Trade a heavy leadership on ``a`` for a lighter one its follower leads: no data moves.

    Applied as two transfers, each checked by every optimized goal; undone if the second
    is vetoed, so only the pair's net effect ever stays.
    """
    model, goal = ctx.model, ctx.goal
    upper, _ = goal.limits(model)
    d = goal.dim
    ps = np.nonzero((model.leader == a) & model.movable & (model.rf > 1))[0]
    load_p = goal.relief(model, ps, a)
    ps = ps[np.argsort(-load_p, kind="stable")][:SWAP_LEADERSHIPS]
    on_a = model.partitions_on(a)  # leadership transfers leave it as it is
    for p in ps.tolist():
        if not goal.over(model, a):
            return
        row = model.replicas[p]
        for f in [b for b in row.tolist() if b >= 0 and b != a and model.dest_ok[b]]:
            qs = on_a[(model.leader[on_a] == f) & model.movable[on_a]]
            if not len(qs):
                continue
            lp = float(goal.relief(model, np.array([p]), a)[0])
            lq = goal.relief(model, qs, f)
            room = upper[f] * model.cap[f, d] - model.load[f, d]
            need = model.load[a, d] - upper[a] * model.cap[a, d]
            want = min(max((model.load[a, d] - model.load[f, d]) / 2, need), room)
            net = lp - lq
            ok = (net > 0) & (net <= room)
            if not ok.any():
                continue
            k = int(np.argmin(np.where(ok, np.abs(net - want), np.inf)))
            q = int(qs[k])
            first, second = Move(LEADERSHIP, p, a, f), Move(LEADERSHIP, q, f, a)
            before = goal.term(model, a, model.load[a, d]) + goal.term(model, f, model.load[f, d])
            after = goal.term(model, a, model.load[a, d] - net[k]) + goal.term(
                model, f, model.load[f, d] + net[k]
            )
            if before - after < goal.min_gain(model, before) or not ctx.try_move(first):
                continue
            if ctx.try_move(second):
                break
            model.apply(Move(LEADERSHIP, p, f, a))  # undo the first half


def fill_leaderships(b: int, ctx: SearchContext) -> None:
    """Take leaderships onto ``b`` while it is under its lower limit."""
    model, goal = ctx.model, ctx.goal
    ps = model.partitions_on(b)
    ps = ps[(model.leader[ps] != b) & model.movable[ps]]
    # Partitions preferring b first (election only), then by this goal's key.
    ps = ps[np.lexsort((goal.leadership_key(model, ps), model.orig_replicas[ps, 0] != b))]
    # In order, each candidate that passes ``fits``, ``wants`` and every goal's accept
    # is applied. A rejected candidate changes nothing, so the ones the vectorized
    # screen rejects at the current loads are skipped in one step.
    i, n, misses, chunk = 0, len(ps), 0, 0
    while i < n and goal.under(model, b):
        if misses >= SCREEN_FIRST:
            chunk = max(chunk, SCREEN_FIRST)
            cand = ps[i : i + chunk]
            vec = np.zeros((len(cand), model.load.shape[1]))
            vec[:, OUT], vec[:, LBIN], vec[:, NLEAD] = (
                model.leader_out[cand],
                model.bytes_in[cand],
                1.0,
            )
            hits = np.flatnonzero(screen(ctx, model.leader[cand], b, vec))
            if not len(hits):
                i += len(cand)
                chunk = min(4 * chunk, SCREEN_CHUNK)
                continue
            if hits[0] < SCREEN_FIRST // 4:
                misses, chunk = 0, 0  # not skipping much here: one by one again
            i += int(hits[0])
        p = int(ps[i])
        i += 1
        move = Move(LEADERSHIP, p, int(model.leader[p]), b)
        if goal.fits(move, model) and goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
            misses, chunk = 0, 0
        else:
            misses += 1


def assignable(model: ClusterModel) -> bool:
    """Whether ``assign_leaderships`` builds its program here: at most LP_MAX_SLOTS replica slots of
    partitions whose leadership may move (a plan never changes a partition's replica count)."""
    return 0 < int(model.rf[model.movable & (model.rf > 1)].sum()) <= LP_MAX_SLOTS


def assign_leaderships(ctx: SearchContext) -> bool:
    """Leaderships reassigned as a whole; True if any changed.

    A linear program spreads each movable partition's leadership over its replicas so that every
    broker ends within the goal's limits (a unit of violation, in mean broker loads, weighs
    LP_VIOLATION changed leaderships; a changed leadership costs 1, one back to the preferred
    replica LP_PREFERRED). The partitions it leaves whole keep its choice; those it splits are
    placed whole by a small integer program over them alone. Greedy transfers stop where a broker
    under its floor would need leaderships passed on over several hops; the program sees every hop
    at once. The transfers are applied as a set (other goals accept each; the searching goal judges
    the set, as the order within one plan is no constraint), and kept only if the searching goal's
    metric fell and no other rose (``SearchContext.better``)."""
    model, goal = ctx.model, ctx.goal
    ps = np.flatnonzero(model.movable & (model.rf > 1))
    reps = model.replicas[ps]
    if not assignable(model):
        return False
    rows, cols = np.nonzero(reps >= 0)
    n_b = model.n_brokers
    brokers, carried = reps[rows, cols], model.leader_out[ps][rows]
    cap, util = model.cap[:, goal.dim], model.cluster_util(goal.dim)
    upper, lower = goal.limits(model)
    hi = upper * cap  # inf where the goal has no upper limit: none in the program
    lo = np.where(np.isfinite(lower), lower, 0.0) * cap
    # What the partitions without a choice put on each broker stays.
    fixed = model.load[:, goal.dim] - np.bincount(
        model.leader[ps], weights=model.leader_out[ps], minlength=n_b
    )
    # A changed leadership costs 1, half that to the preferred replica (an election, no reassignment).
    changed = (brokers != model.leader[ps][rows]) * np.where(
        brokers == model.orig_replicas[ps, 0][rows], LP_PREFERRED, 1.0
    )
    weight = LP_VIOLATION / max(float(cap.mean() * util), EPS)
    x = _leader_program(rows, brokers, changed, [Band(carried, fixed, hi, lo, weight)], integral=False)
    if x is None:
        return False
    split = np.zeros(len(ps), dtype=bool)
    split[rows[(x > LP_WHOLE) & (x < 1.0 - LP_WHOLE)]] = True
    if split.any():
        whole = ~split[rows]
        placed = fixed + np.bincount(brokers[whole], weights=(x * carried)[whole], minlength=n_b)
        part = split[rows]
        renum = np.cumsum(split) - 1
        y = _leader_program(
            renum[rows[part]],
            brokers[part],
            changed[part],
            [Band(carried[part], placed, hi, lo, weight)],
            integral=True,
        )
        if y is None:
            return False
        x = x.copy()
        x[part] = y
    share = np.zeros(reps.shape)
    share[rows, cols] = x
    target = reps[np.arange(len(ps)), share.argmax(axis=1)]
    change = np.flatnonzero(target != model.leader[ps])
    if not len(change):
        return False
    before = ctx.metrics()
    mark, swapped = len(model.log), set(model.swapped)
    for i in change[np.argsort(-model.leader_out[ps[change]], kind="stable")].tolist():
        p = int(ps[i])
        # The goals already optimized accept each transfer; the searching goal judges the set below.
        goal.try_move(Move(LEADERSHIP, p, int(model.leader[p]), int(target[i])), model, ctx.optimized)
    if len(model.log) > mark and not ctx.better(before):
        model.undo_to(mark, swapped)
    return len(model.log) > mark


def balance_leader_counts(model: ClusterModel, goal: ResourceGoal, held: Sequence[ResourceGoal]) -> bool:
    """Leaderships per broker brought within ``goal``'s band at once; True if applied.

    Greedy transfers stop where a broker over the band has no follower with room in the count, or
    where every leadership it could give would take a traffic goal's broker past a limit; the counts
    then need leaderships passed on over several hops, or a heavy one traded for light ones. An
    integer program over the partitions with a replica on a broker outside the band sees them all:
    fewest transfers (LP_PREFERRED each back to the preferred replica) with every count inside the
    band (a unit outside weighs LP_VIOLATION / the mean count), every broker's load on each leader-
    borne goal optimized before (``held``: not idle) where it was or within that goal's limits, its
    margin clear. The set is applied only if it brings every count within the band, and kept only
    if each broker it changes keeps those limits (the order of transfers within a plan is no
    constraint, so each is not judged alone)."""
    upper, lower = goal.limits(model)
    count = model.load[:, NLEAD]
    outside = np.flatnonzero((count > upper + EPS) | (count < lower - EPS))
    if not len(outside):
        return False
    reps = model.replicas
    ps = np.flatnonzero(model.movable & (model.rf > 1) & np.isin(reps, outside).any(axis=1))
    if not len(ps):
        return False
    reps, leader = reps[ps], model.leader[ps]
    # A slot a leadership may go to: its leader's, or a replica on a broker that may receive.
    ok = (reps >= 0) & ((reps == leader[:, None]) | model.dest_ok[np.maximum(reps, 0)])
    rows, cols = np.nonzero(ok)
    if len(rows) > COUNT_LP_SLOTS:
        return False
    brokers, n_b = reps[rows, cols], model.n_brokers
    changed = (brokers != leader[rows]) * np.where(
        brokers == model.orig_replicas[ps, 0][rows], LP_PREFERRED, 1.0
    )
    ones = np.ones(len(rows))
    bands = [
        Band(
            ones,
            count - np.bincount(leader, minlength=n_b),
            upper,
            np.where(np.isfinite(lower), lower, -np.inf),
            LP_VIOLATION / max(float(count.mean()), 1.0),
        )
    ]
    for g in held:
        carried = g.per_replica(model, ps)  # leader-borne: what the leader's replica carries
        hi, lo = _held_band(model, g)
        bands.append(
            Band(
                carried[rows],
                model.load[:, g.dim] - np.bincount(leader, carried, minlength=n_b),
                hi,
                lo,
                None,
            )
        )
    x = _leader_program(
        np.unique(rows, return_inverse=True)[1],
        brokers,
        changed,
        bands,
        integral=True,
        node_limit=COUNT_LP_NODES,
        gap=COUNT_LP_GAP,
    )
    if x is None:
        return False
    share = np.full(reps.shape, -1.0)
    share[rows, cols] = x
    target = reps[np.arange(len(ps)), share.argmax(axis=1)]
    after = bands[0].fixed + np.bincount(target, minlength=n_b)
    if ((after > upper + EPS) | (after < lower - EPS)).any():
        return False  # all or nothing: the goal undoes a partial fix anyway
    change = np.flatnonzero(target != leader)
    if not len(change):
        return False
    mark, swapped = len(model.log), set(model.swapped)
    for i in change.tolist():
        move = Move(LEADERSHIP, int(ps[i]), int(leader[i]), int(target[i]))
        if not model.allowed(move) or not model.within_caps(move):
            model.undo_to(mark, swapped)
            return False
        model.apply(move)
    if not all(_keeps(model, g, mark) for g in held):
        model.undo_to(mark, swapped)
        return False
    return True


def _held_band(model: ClusterModel, g: ResourceGoal) -> tuple[np.ndarray, np.ndarray]:
    """Per broker, the load on ``g``'s dimension a set of transfers may leave: where it is, or within
    ``g``'s limits ``g.margin`` clear (``ResourceGoal.accept``'s rule for the brokers a move changes)."""
    up, low = g.limits(model)
    cap, load = model.cap[:, g.dim], model.load[:, g.dim]
    hi = np.maximum((up - g.margin) * cap, load)
    lo = np.minimum(np.where(np.isfinite(low), (low + g.margin) * cap, -np.inf), load)
    return hi, lo


def _keeps(model: ClusterModel, g: ResourceGoal, mark: int) -> bool:
    """Every broker the transfers since ``mark`` changed ends within ``_held_band`` of the loads
    before them (``accept``'s tolerance)."""
    d, n_b = g.dim, model.n_brokers
    moves = model.log[mark:]
    ps = np.array([m.p for m in moves])
    carried = g.per_replica(model, ps)
    delta = np.bincount([m.dst for m in moves], carried, minlength=n_b) - np.bincount(
        [m.src for m in moves], carried, minlength=n_b
    )
    up, low = g.limits(model)
    cap, load = model.cap[:, d], model.load[:, d]
    tol = EPS * np.maximum(1.0, np.abs(up)) - g.margin
    gained, lost = delta > 0, delta < 0
    return bool(
        (load[gained] / cap[gained] <= up[gained] + tol[gained]).all()
        and (load[lost] / cap[lost] >= low[lost] - tol[lost]).all()
    )


@dataclass(frozen=True)
class Band:
    """One per-broker constraint of a leader program: leading each slot puts ``carried`` on its
    broker, ``fixed`` stays there whatever the program does, and the total is held within ``lo`` ..
    ``hi`` (-inf, inf: no limit). ``weight`` None: a hard band; otherwise each unit outside it costs
    ``weight``."""

    carried: np.ndarray
    fixed: np.ndarray
    hi: np.ndarray
    lo: np.ndarray
    weight: float | None


def _leader_program(
    rows: np.ndarray,
    brokers: np.ndarray,
    changed: np.ndarray,
    bands: Sequence[Band],
    *,
    integral: bool,
    node_limit: int = LP_NODES,
    gap: float | None = None,
) -> np.ndarray | None:
    """Each slot's share of its partition's leadership (slots: a replica each, ``rows`` its partition
    numbered from 0, ``brokers`` its broker): the least ``changed`` leaderships plus each soft band's
    weighted units outside it, within every hard band. None if the solver found no assignment."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix, hstack, vstack

    n_slots, n_parts = len(rows), int(rows.max()) + 1
    n_b = len(bands[0].fixed)
    slot, b = np.arange(n_slots), np.arange(n_b)
    one = csr_matrix((np.ones(n_slots), (rows, slot)), shape=(n_parts, n_slots))
    # Per band and broker: load - excess <= hi and load + deficit >= lo (excess, deficit 0 if hard).
    blocks, lower_rows, upper_rows, costs, slack_ub = [], [], [], [changed], []
    for k, band in enumerate(bands):
        load = csr_matrix((band.carried, (brokers, slot)), shape=(n_b, n_slots))
        blocks.append((k, load))
        upper_rows.append(
            np.concatenate(
                [np.where(np.isfinite(band.hi), band.hi - band.fixed, np.inf), np.full(n_b, np.inf)]
            )
        )
        lower_rows.append(
            np.concatenate(
                [np.full(n_b, -np.inf), np.where(np.isfinite(band.lo), band.lo - band.fixed, -np.inf)]
            )
        )
        costs.append(np.full(2 * n_b, 0.0 if band.weight is None else band.weight))
        slack_ub.append(np.full(2 * n_b, 0.0 if band.weight is None else np.inf))
    n_slack = 2 * n_b * len(bands)
    signs = csr_matrix(
        (np.concatenate([-np.ones(n_b), np.ones(n_b)]), (np.concatenate([b, n_b + b]), np.arange(2 * n_b))),
        shape=(2 * n_b, 2 * n_b),
    )
    rows_of = []
    for k, load in blocks:
        left = vstack([load, load])
        right = [csr_matrix((2 * n_b, 2 * n_b)) for _ in bands]
        right[k] = signs
        rows_of.append(hstack([left, *right]))
    a = vstack([hstack([one, csr_matrix((n_parts, n_slack))]), *rows_of]).tocsr()
    res = milp(
        np.concatenate(costs),
        constraints=[
            LinearConstraint(
                a,
                np.concatenate([np.ones(n_parts), *lower_rows]),
                np.concatenate([np.ones(n_parts), *upper_rows]),
            )
        ],
        integrality=np.concatenate([np.full(n_slots, 1 if integral else 0), np.zeros(n_slack)]),
        bounds=Bounds(0.0, np.concatenate([np.ones(n_slots), *slack_ub])),
        # A node limit, not a time limit: the same cluster plans the same on any machine.
        options=({"node_limit": node_limit} | ({} if gap is None else {"mip_rel_gap": gap}))
        if integral
        else {},
    )
    return None if res.x is None else res.x[:n_slots]
