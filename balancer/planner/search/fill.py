"""Filling: moving load onto each broker under the goal's lower limit, the coldest first."""

from __future__ import annotations

import numpy as np

from balancer.vocabulary import SOFT_GOALS

from ..actions import Move
from ..model import DISK, IN, LBIN, NLEAD, NREP, OUT
from .constants import (
    DEST_TRIES,
    FILL_CANDIDATES,
    FILL_TRIES_FLOOR,
    REPLICA_MOVE,
    SCREEN_CHUNK,
    SCREEN_FIRST,
)
from .context import SearchContext
from .cost import cover_data, move_cost
from .leadership import fill_leaderships
from .screen import screen


def fill_all(ctx: SearchContext) -> None:
    model, goal = ctx.model, ctx.goal
    _, lower = goal.limits(model)
    if not np.isfinite(lower).any():
        return
    util = model.util(goal.dim)
    slack = goal.slack(model)
    under = [
        b for b in np.argsort(util, kind="stable").tolist() if util[b] < lower[b] - slack and model.dest_ok[b]
    ]
    if not under:
        return
    avg = model.cluster_util(goal.dim)
    pools: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for b in under:
        if goal.leadership:
            fill_leaderships(b, ctx)
        if not goal.moves or not goal.under(model, b):
            continue
        first = ctx.data_first or (goal.weighs_moves and over_disk_line(b, ctx))
        order = "data" if first else "ceiling"
        if order not in pools:
            pools[order] = fill_pool(avg, ctx, data_first=first)
        if goal.covers and fill_cover(b, pools[order], ctx):
            continue
        limit = 4 * FILL_CANDIDATES // max(1, len(under)) + FILL_TRIES_FLOOR
        sources = disk_sources(avg, ctx) if not first and goal.weighs_moves else None
        if sources is not None and sources.any() and ctx.fill_disk_excess:
            if "excess" not in pools:
                pools["excess"] = excess_pool(sources, ctx)
            fill_from_disk_excess(b, pools["excess"], limit, ctx)
            if not goal.under(model, b):
                continue
        if first:
            pool = for_broker(b, pools[order], ctx)
        elif goal.weighs_moves:
            pool = replica_order(b, avg, pools, ctx)
        else:
            pool = pools[order]
        mark = len(model.log)
        fill_from_pool(b, pool, limit, ctx)
        if sources is not None and sources.any() and ctx.options.fill_disk_excess is None:
            # Bytes this fill took off brokers within the disk line while others stood over it:
            # bytes that buy the disk goal nothing, where a draw on the excess might have.
            model.disk_fills += sum(float(model.size[m.p]) for m in model.log[mark:] if not sources[m.src])


def excess_pool(sources: np.ndarray, ctx: SearchContext) -> tuple[np.ndarray, np.ndarray]:
    """The replicas a fill may draw on the disk excess with (``fill_from_disk_excess``): on the
    brokers of mask ``sources`` (``disk_sources``), each no bigger than its broker's excess over the
    disk goal's line, in the goal's cost order (relief per byte with its per-move charge: few big
    moves, as the plain fill's where the disk goal has work), the first FILL_CANDIDATES."""
    model, goal = ctx.model, ctx.goal
    ps, bs, relief = _relieving_slots(sources, ctx)
    keep = model.size[ps] <= model.load[bs, DISK] - ctx.disk_line * model.cap[bs, DISK]
    ps, bs, relief = ps[keep], bs[keep], relief[keep]
    return _first_candidates(ps, bs, goal.move_key(model, ps, relief, bs))


def fill_from_disk_excess(
    dst: int, pool: tuple[np.ndarray, np.ndarray], limit: int, ctx: SearchContext
) -> None:
    """Lift ``dst`` first with replicas of ``pool`` (``excess_pool``: off brokers over the disk
    goal's line), each source up to its excess there and ``dst`` up to its room under it: bytes the
    disk goal must move off those brokers and onto brokers like ``dst`` anyway, so the traffic they
    carry comes at no data of its own (the plain fill draws on the hottest brokers whatever their
    disk, and the disk goal then moves the disk excess as well, past what ``dst``'s traffic needs).
    In the pool's order; no source taken under, nor ``dst`` over, the replica count goal's band
    (that goal would move replicas back, carrying traffic and disk); at most ``limit`` tried (and
    four times that looked at: sources whose excess is spent pass their replicas by)."""
    model, goal = ctx.model, ctx.goal
    if not model.dest_ok[dst]:
        return
    line = ctx.disk_line * model.cap[:, DISK]
    need, eligible = reachable(dst, pool, ctx, racks=True)
    ps, bs = pool[0][eligible], pool[1][eligible]
    keep = model.size[ps] <= line[dst] - model.load[dst, DISK]
    ps, bs = ps[keep], bs[keep]
    if need <= 0 or not len(ps):
        return
    fewest, most = count_band(ctx)
    tries = 0
    for seen, (p, a) in enumerate(zip(ps.tolist(), bs.tolist(), strict=True)):
        if not goal.under(model, dst) or tries >= limit or seen >= 4 * limit:
            return
        s = float(model.size[p])
        if s > model.load[a, DISK] - line[a] or model.load[dst, DISK] + s > line[dst]:
            continue  # the source's excess, or dst's room, is used up by earlier moves
        if model.load[a, NREP] <= fewest[a] or model.load[dst, NREP] >= most[dst]:
            continue  # the replica count goal would have to undo it with moves of its own
        if not model.holds(p, a) or model.holds(p, dst):
            continue
        tries += 1
        move = Move(REPLICA_MOVE, p, a, dst)
        if (
            goal.fits(move, model)
            and goal.wants(move, model, ctx.guard_ratio)
            and (ctx.rack is None or ctx.rack.accept(move, model))
        ):
            ctx.try_move(move)


def count_band(ctx: SearchContext) -> tuple[np.ndarray, np.ndarray]:
    """Per broker, the fewest and the most replicas the replica count goal leaves there, where it
    runs later (its own band); -inf and inf where it does not."""
    from ..goals import ReplicaCountDistributionGoal  # the goals import the search

    model, options = ctx.model, ctx.options
    names = options.goals if options.goals is not None else SOFT_GOALS
    if ReplicaCountDistributionGoal.name not in names:
        n = model.n_brokers
        return np.full(n, -np.inf), np.full(n, np.inf)
    upper, lower = ReplicaCountDistributionGoal.from_options(options).limits(model)
    return lower * model.cap[:, NREP], upper * model.cap[:, NREP]  # limits are per unit of capacity


def disk_sources(avg: float, ctx: SearchContext) -> np.ndarray:
    """Per broker: above the average on the goal's resource (a fill's source) and over the disk
    goal's line (none where that goal has no line)."""
    model = ctx.model
    if not np.isfinite(ctx.disk_line):
        return np.zeros(len(model.cap), dtype=bool)
    hot: np.ndarray = (model.util(ctx.goal.dim) > avg) & (
        model.load[:, DISK] > ctx.disk_line * model.cap[:, DISK]
    )
    return hot


def for_broker(
    dst: int, pool: tuple[np.ndarray, np.ndarray], ctx: SearchContext
) -> tuple[np.ndarray, np.ndarray]:
    """The order ``dst`` fills from a data-first ``pool`` in: the pool's own, or, where that copies
    more than the data slack over it, ``dst``'s: the replicas that may move there (``reachable``,
    the rack goal kept) best relief per byte first with a per-move cost sized for ``dst``'s own need
    over them (``move_cost``). The pool's cost is sized for every broker's deficit over all its
    replicas, while a rack lets ``dst`` take only some (with RF = the racks, a partition's one
    replica on ``dst``'s rack): the cheap relief that sizing counts may lie on other racks, and
    ``dst``, filled in the pool's order, copy many times the least its own candidates need."""
    model, goal = ctx.model, ctx.goal
    need, eligible = reachable(dst, pool, ctx, racks=True)
    ps, bs = pool[0][eligible], pool[1][eligible]
    if not len(ps) or need <= 0:
        return pool
    relief = goal.relief(model, ps, bs)
    size = model.size[ps]
    capped = np.minimum(relief, need)
    overhead = move_cost(size, capped, need, goal.move_overhead_ceiling(model), ctx.data_slack)
    order = np.lexsort((bs, ps, goal.move_key(model, ps, relief, bs, overhead=overhead)))
    own = cover_data(size[order], capped[order], need)
    if (1.0 + ctx.data_slack) * own >= cover_data(size, capped, need):
        return pool
    return ps[order], bs[order]


def replica_order(
    b: int, avg: float, pools: dict[str, tuple[np.ndarray, np.ndarray]], ctx: SearchContext
) -> tuple[np.ndarray, np.ndarray]:
    """The pool a traffic fill lifts ``b`` from replica by replica where the disk goal has work (the
    pools drawn once per ``fill_all``, in ``pools``): the goal's ceiling order, few big moves; or the
    order that charges moves as a data-first fill's with the disk excess of the brokers it fills from
    as bytes it may copy free (the cost's floor, as a shed's: ``shed.disk_hot_cost``; that goal must
    move them anyway, though the order does not seek them out), where the ceiling's would copy more
    than the data slack over it (a broker lifted with big cold replicas where small hot ones would
    do). Then data first (no bytes free) where that copies less by the slack still: taken by that
    search (``SearchContext.fill_data_first``), its saving counted by this one (``wide_fills``). Its
    own pool, drawn here: the data order's is drawn when a broker over the disk line first needs it."""
    model, goal = ctx.model, ctx.goal
    order = "ceiling"
    if "floor" not in pools:
        pools["floor"] = fill_pool(
            avg, ctx, data_first=True, floor=disk_excess(model.util(goal.dim) > avg, ctx)
        )
    taken, floored = fill_data(b, pools[order], ctx), fill_data(b, pools["floor"], ctx)
    if (1.0 + ctx.data_slack) * floored < taken:
        order, taken = "floor", floored
    if ctx.options.fill_data_first is False:
        return pools[order]
    if "data_first" not in pools:
        pools["data_first"] = fill_pool(avg, ctx, data_first=True)
    data_first = for_broker(b, pools["data_first"], ctx)
    least = fill_data(b, data_first, ctx)
    if (1.0 + ctx.data_slack) * least >= taken:
        return pools[order]
    if ctx.fill_data_first:
        return data_first
    model.wide_fills += taken - least
    return pools[order]


def fill_data(dst: int, pool: tuple[np.ndarray, np.ndarray], ctx: SearchContext) -> float:
    """Data filling ``dst`` from ``pool`` in its order copies (``cover_data`` over the replicas that
    may go there, the rack goal's spread kept; inf where they cannot lift it to its lower limit)."""
    need, eligible = reachable(dst, pool, ctx, racks=True)
    pool_p, pool_src = pool
    relief = ctx.goal.relief(ctx.model, pool_p[eligible], pool_src[eligible])
    return cover_data(ctx.model.size[pool_p[eligible]], np.minimum(relief, need), need)


def reachable(
    dst: int, pool: tuple[np.ndarray, np.ndarray], ctx: SearchContext, *, racks: bool
) -> tuple[float, np.ndarray]:
    """What ``dst`` lacks of the goal's lower limit, and per replica of ``pool`` whether it may move
    there: its broker still holds it and ``dst`` holds none of its partition (with ``racks``, and
    the rack goal accepts it, ``RackAwareGoal.accepts``)."""
    model, goal = ctx.model, ctx.goal
    _, lower = goal.limits(model)
    need = float(lower[dst] * model.cap[dst, goal.dim] - model.load[dst, goal.dim])
    pool_p, pool_src = pool
    rows = model.replicas[pool_p]
    eligible: np.ndarray = (rows == pool_src[:, None]).any(axis=1) & ~(rows == dst).any(axis=1)
    if racks and ctx.rack is not None:
        eligible &= ctx.rack.accepts(model, pool_p, pool_src, dst)
    return need, eligible


def fill_cover(dst: int, pool: tuple[np.ndarray, np.ndarray], ctx: SearchContext) -> bool:
    """Fill ``dst`` in one move where one replica can: of the pool's replicas whose relief alone
    lifts ``dst`` to its lower limit, the smallest data first, up to DEST_TRIES that pass: only a
    replica within the data slack of the data the pool, in its order, would copy to lift ``dst``
    that far (one giant replica is not worth its bytes, whether or not the search puts data
    first), or, where the disk goal has work (``SearchContext.data_first`` is off for it), one that
    takes disk off a broker over the disk goal's line onto room under it on ``dst`` (bytes that
    goal would move anyway)."""
    model, goal = ctx.model, ctx.goal
    need, eligible = reachable(dst, pool, ctx, racks=False)
    pool_p, pool_src = pool
    relief = goal.relief(model, pool_p, pool_src)
    budget = (1.0 + ctx.data_slack) * cover_data(
        model.size[pool_p[eligible]], np.minimum(relief[eligible], need), need
    )
    cheap = model.size[pool_p] <= budget
    if not ctx.data_first and np.isfinite(ctx.disk_line):
        line = ctx.disk_line * model.cap[:, DISK]
        cheap |= (model.load[pool_src, DISK] > line[pool_src]) & (
            model.load[dst, DISK] + model.size[pool_p] <= line[dst]
        )
    covering = np.flatnonzero(eligible & (relief >= need) & cheap)
    if not len(covering) or not model.dest_ok[dst]:
        return False
    refused = 0
    for pick in covering[np.argsort(model.size[pool_p[covering]], kind="stable")].tolist():
        move = Move(REPLICA_MOVE, int(pool_p[pick]), int(pool_src[pick]), dst)
        if not (goal.fits(move, model) and goal.wants(move, model, ctx.guard_ratio)):
            continue
        if (ctx.rack is None or ctx.rack.accept(move, model)) and ctx.try_move(move):
            return True
        refused += 1
        if refused >= DEST_TRIES:
            break
    return False


def fill_from_pool(b: int, pool: tuple[np.ndarray, np.ndarray], limit: int, ctx: SearchContext) -> None:
    """Move replicas from the pool to ``b`` in pool order while ``b`` is under its lower limit,
    trying at most ``limit`` candidates that could go to ``b`` at all.

    One by one while candidates keep passing; after SCREEN_FIRST rejections in a row, the
    vectorized screen skips the candidates it rejects at the current loads, counted as tried:
    rejecting one changes nothing, so the result is the one-by-one loop's.
    """
    model, goal = ctx.model, ctx.goal
    pool_p, pool_a = pool
    leader_only = goal.leader_borne
    tries, i, n, misses, chunk = 0, 0, len(pool_p), 0, 0
    while i < n and goal.under(model, b) and tries <= limit:
        if misses < SCREEN_FIRST:
            p, a = int(pool_p[i]), int(pool_a[i])
            i += 1
            if leader_only and model.leader[p] != a:
                continue
            if not model.holds(p, a) or model.holds(p, b) or not model.dest_ok[b]:
                continue
            tries += 1
            if ctx.rack is not None and not ctx.rack.accept(Move(REPLICA_MOVE, p, a, b), model):
                misses += 1  # the cheapest check first: a new broker's rack refuses most of a pool
                continue
        else:
            chunk = max(chunk, SCREEN_FIRST)
            ps, srcs = pool_p[i : i + chunk], pool_a[i : i + chunk]
            rows = model.replicas[ps]
            led = model.leader[ps] == srcs
            valid = (rows == srcs[:, None]).any(axis=1) & ~(rows == b).any(axis=1) & bool(model.dest_ok[b])
            if leader_only:
                valid &= led
            # The loop stops at the first candidate met with more than ``limit`` tried before it.
            before = tries + np.cumsum(valid) - valid
            stop = np.flatnonzero(before > limit)
            end = int(stop[0]) if len(stop) else len(ps)
            vec = model.contrib_matrix(ps[:end], -1)
            ledf = led[:end].astype(np.float64)
            vec[:, OUT], vec[:, LBIN], vec[:, NLEAD] = (
                model.leader_out[ps[:end]] * ledf,
                vec[:, IN] * ledf,
                ledf,
            )
            hit = valid[:end] & screen(ctx, srcs[:end], b, vec)
            if ctx.rack is not None:
                hit &= ctx.rack.accepts(model, ps[:end], srcs[:end], b)
            hits = np.flatnonzero(hit)
            if not len(hits):
                tries += int(valid[:end].sum())
                if end < len(ps):
                    return
                i += len(ps)
                chunk = min(4 * chunk, SCREEN_CHUNK)
                continue
            k = int(hits[0])
            if k < SCREEN_FIRST // 4:
                misses, chunk = 0, 0  # the screen is not skipping much here: one by one again
            tries += int(valid[:k].sum()) + 1
            i += k + 1
            p, a = int(ps[k]), int(srcs[k])
        move = Move(REPLICA_MOVE, p, a, b)  # the rack goal accepts it (checked above)
        if goal.fits(move, model) and goal.wants(move, model, ctx.guard_ratio) and ctx.try_move(move):
            misses, chunk = 0, 0
        else:
            misses += 1


def over_disk_line(b: int, ctx: SearchContext) -> bool:
    """``b``'s disk is over the disk goal's line: every byte a traffic fill lands there, that goal
    must move off again, so the fill lifts it data first (the fewest bytes for its deficit) even
    where the disk goal has work and the search's order elsewhere favours few big moves."""
    model = ctx.model
    return bool(model.load[b, DISK] > ctx.disk_line * model.cap[b, DISK])


def fill_pool(
    avg: float, ctx: SearchContext, *, data_first: bool, floor: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Replicas on brokers above average, best relief per byte first: (partitions, brokers); with
    ``data_first``, a per-move cost sized as a data-first shed's (``floor``: bytes it may copy
    free, ``move_cost``), else the goal's ceiling."""
    model, goal = ctx.model, ctx.goal
    ps, bs, relief = _relieving_slots(model.util(goal.dim) > avg, ctx)
    overhead = None
    if data_first and len(ps):
        # Data + cost x moves, as a shed: the cost sized for the brokers' whole deficit, on the
        # candidates the first FILL_CANDIDATES could come from (the best by relief per byte with
        # no cost and with the most), so that sizing it stays off the whole cluster.
        _, lower = goal.limits(model)
        deficit = np.maximum(lower * model.cap[:, goal.dim] - model.load[:, goal.dim], 0.0)
        need = float(deficit[model.dest_ok].sum())
        ranked = np.minimum(relief, need)
        ceiling = goal.move_overhead_ceiling(model)
        size = model.size[ps]
        some = np.union1d(
            _best(ranked / size.clip(min=1e-300), FILL_CANDIDATES),
            _best(ranked / (size + ceiling), FILL_CANDIDATES),
        )
        overhead = move_cost(size[some], ranked[some], need, ceiling, ctx.data_slack, floor)
    return _first_candidates(ps, bs, goal.move_key(model, ps, relief, bs, overhead=overhead))


def _relieving_slots(sources: np.ndarray, ctx: SearchContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The movable replicas on the brokers of mask ``sources`` whose move relieves the goal's
    resource there: (partitions, brokers, relief), in row order."""
    model, goal = ctx.model, ctx.goal
    flat = model.replicas.ravel()
    # Per broker in ``sources``, and False for an empty slot (-1 reads the last entry): the replica
    # slots on those brokers in one gather, in row order, before any column is read for them.
    slots = np.flatnonzero(np.append(sources, False)[flat])
    ps, bs = slots // model.replicas.shape[1], flat[slots]
    keep = model.movable[ps]
    ps, bs = ps[keep], bs[keep]
    relief = goal.relief(model, ps, bs)
    keep = relief > 0
    return ps[keep], bs[keep], relief[keep]


def _first_candidates(ps: np.ndarray, bs: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The FILL_CANDIDATES replicas (partitions ``ps`` on brokers ``bs``) lowest by ``key``, in its
    order (ties: partition, then broker)."""
    if len(key) > FILL_CANDIDATES:
        top = np.argpartition(key, FILL_CANDIDATES)[:FILL_CANDIDATES]
        ps, bs, key = ps[top], bs[top], key[top]
    order = np.lexsort((bs, ps, key))
    return ps[order], bs[order]


def disk_excess(sources: np.ndarray, ctx: SearchContext) -> float:
    """Bytes the brokers of mask ``sources`` hold over the disk goal's line (0 where it has none)."""
    model = ctx.model
    if not np.isfinite(ctx.disk_line):
        return 0.0
    over = model.load[sources, DISK] - ctx.disk_line * model.cap[sources, DISK]
    return float(over[over > 0].sum())


def _best(score: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores (all of them where there are fewer), in no order."""
    if len(score) <= k:
        return np.arange(len(score))
    return np.argpartition(-score, k)[:k]
