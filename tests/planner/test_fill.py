"""The traffic fill's draw on disk excess (``search.fill.fill_from_disk_excess``): the bytes it lands
on a broker are bytes the disk goal must move off the brokers over its line, and no more."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import ClusterModel, PlannerOptions, default_goals
from balancer.planner.model import DISK, NREP
from balancer.planner.search.context import SearchContext
from balancer.planner.search.fill import (
    count_band,
    disk_sources,
    excess_pool,
    fill_from_disk_excess,
)
from balancer.vocabulary import SOFT_GOALS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from planner_bench import fleet_cluster


def network_in_fill(snapshot: dict, options: PlannerOptions) -> SearchContext:
    """The network_in goal's search context on a fresh model, the goals before it optimized."""
    model = ClusterModel(snapshot, options)
    goals = default_goals(options)
    i = next(k for k, g in enumerate(goals) if g.name == "network_in_distribution")
    return goals[i].search_context(model, goals[:i], options)


def draw(dst: int, ctx: SearchContext) -> None:
    """``fill_from_disk_excess`` as ``fill_all`` calls it, from the pool of this model's loads."""
    sources = disk_sources(ctx.model.cluster_util(ctx.goal.dim), ctx)
    fill_from_disk_excess(dst, excess_pool(sources, ctx), 10_000, ctx)


def scale_out(seed: int, racks: int, size_sigma: float) -> dict:
    return generate(
        ScenarioSpec(
            brokers=9,
            racks=racks,
            topics=12,
            partitions_per_topic=(4, 24),
            replication_factor=3 if racks != 2 else 2,
            skew=1.4,
            size_sigma=size_sigma,
            new_empty_brokers=2,
            seed=seed,
        )
    )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    racks=st.sampled_from([0, 2, 3]),
    size_sigma=st.sampled_from([0.0, 1.0]),
    counts=st.sampled_from([1.02, 1.10]),  # a narrow replica count band binds the sources early
)
def test_a_fill_draws_only_on_disk_excess_and_keeps_the_counts_band(seed, racks, size_sigma, counts):
    options = PlannerOptions(thresholds={"replicas": counts})
    ctx = network_in_fill(scale_out(seed, racks, size_sigma), options)
    model = ctx.model
    line = ctx.disk_line * model.cap[:, DISK]
    before = model.load.copy()
    over = before[:, DISK] > line
    fewest, most = count_band(ctx)
    dst = int(np.flatnonzero(before[:, NREP] == 0)[0])  # a new, empty broker
    draw(dst, ctx)
    moves = model.log[ctx.start :]
    assert all(m.dst == dst and over[m.src] for m in moves)
    sources = {m.src for m in moves}
    # A source gives up to its excess: it ends on or over the line, and within the count band.
    assert all(model.load[b, DISK] >= line[b] * (1 - 1e-12) for b in sources)
    assert all(model.load[b, NREP] >= fewest[b] for b in sources)
    # The receiver takes what fits under the line and the band's top, and gains the traffic moved.
    assert model.load[dst, DISK] <= line[dst] * (1 + 1e-12)
    assert model.load[dst, NREP] <= most[dst]
    moved_in = sum(float(model.bytes_in[m.p]) for m in moves)
    assert np.isclose(model.load[dst, ctx.goal.dim] - before[dst, ctx.goal.dim], moved_in)


def test_a_fill_lifts_a_new_broker_with_disk_excess_on_a_fleet_cluster():
    # The property above holds vacuously where nothing moves: here the fill must move something.
    # The fleet benchmark's cluster 0 (58 brokers, two new): a few dozen disks just over the line.
    options = PlannerOptions()
    ctx = network_in_fill(fleet_cluster(0), options)
    model = ctx.model
    dst = int(np.flatnonzero(model.load[:, NREP] == 0)[0])
    lifted = model.load[dst, ctx.goal.dim]
    draw(dst, ctx)
    assert len(model.log) > ctx.start
    assert model.load[dst, ctx.goal.dim] > lifted


def test_no_source_is_drawn_under_the_replica_count_band(monkeypatch):
    # The count goal's band rarely binds on small clusters; narrowed to one replica under each
    # broker's count, each source gives at most one replica, and the fill still lifts its broker.
    from balancer.planner.search import fill

    ctx = network_in_fill(fleet_cluster(0), PlannerOptions())
    model = ctx.model
    count = model.load[:, NREP].copy()
    monkeypatch.setattr(fill, "count_band", lambda _: (count - 1, np.full(len(count), np.inf)))
    dst = int(np.flatnonzero(count == 0)[0])
    draw(dst, ctx)
    sources = [m.src for m in model.log[ctx.start :]]
    assert len(sources) > 1 and len(set(sources)) == len(sources)


def test_the_count_band_is_the_replica_count_goals():
    from balancer.planner.goals import ReplicaCountDistributionGoal

    options = PlannerOptions(thresholds={"replicas": 1.02})
    ctx = network_in_fill(scale_out(5, 3, 1.0), options)
    upper, lower = ReplicaCountDistributionGoal.from_options(options).limits(ctx.model)
    fewest, most = count_band(ctx)
    assert (fewest == lower).all() and (most == upper).all() and (fewest < most).all()
    goals = tuple(g for g in SOFT_GOALS if g != "replicas_distribution")
    fewest, most = count_band(network_in_fill(scale_out(5, 3, 1.0), PlannerOptions(goals=goals)))
    assert np.isneginf(fewest).all() and np.isposinf(most).all()
