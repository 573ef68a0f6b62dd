"""The search's vectorized screens (``search.screen``, ``search.swap.first_k``): each decides many
candidates as the scalar rule it stands for decides each."""

from __future__ import annotations

import gc
import weakref

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import ClusterModel, Move, PlannerOptions, default_goals
from balancer.planner.goals import ResourceGoal
from balancer.planner.model import DISK, REPLICA_MOVE, SWAP
from balancer.planner.search.constants import SWAP_PICKS
from balancer.planner.search.move import masked_dests
from balancer.planner.search.screen import first_dests, swap_limits, swap_screen
from balancer.planner.search.swap import first_k, first_passing


@settings(max_examples=200, deadline=None)
@given(
    key=st.lists(st.integers(0, 6), max_size=40).map(lambda xs: np.array(xs, dtype=np.float64)),
    k=st.integers(1, 5),
)
def test_first_k_is_the_stable_sorts_first_k(key, k):
    # Small integer keys: ties everywhere, where only a stable order is one answer.
    assert first_k(key, k).tolist() == np.argsort(key, kind="stable")[:k].tolist()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), heterogeneous=st.booleans())
def test_swap_screen_passes_exactly_the_swaps_every_resource_goal_accepts(seed, heterogeneous):
    # Every swap between two brokers, screened at once, against each resource goal's ``accept``
    # one swap at a time; the limits are the goals' own, so some swaps fail and some pass.
    spec = ScenarioSpec(
        brokers=6,
        racks=0,
        topics=10,
        partitions_per_topic=(2, 6),
        replication_factor=2,
        skew=1.5,
        size_sigma=1.0,
        heterogeneous_capacity=heterogeneous,
        seed=seed,
    )
    model = ClusterModel(generate(spec))
    options = PlannerOptions()
    goals = [g for g in default_goals(options) if isinstance(g, ResourceGoal)]
    ctx = goals[-1].search_context(model, goals[:-1], options)
    verdicts = []
    for a in range(model.n_brokers):
        for b in range(model.n_brokers):
            on_a = [p for p in model.partitions_on(a).tolist() if not model.holds(p, b)]
            on_b = [q for q in model.partitions_on(b).tolist() if not model.holds(q, a)]
            swaps = [Move(SWAP, p, a, b, q) for p in on_a for q in on_b]
            if a == b or not swaps:
                continue
            n = np.array([model.delta(m) for m in swaps])
            screened = swap_screen(n, swap_limits(a, b, ctx)[1]).tolist()
            accepted = [all(g.accept(m, model) for g in ctx.res_goals) for m in swaps]
            assert screened == accepted, (a, b)
            verdicts += accepted
    assert True in verdicts and False in verdicts


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), ties=st.integers(1, 50))
def test_first_passing_are_the_first_exchanges_the_screen_passes_in_the_swap_order(seed, ties):
    # A swap search's picks for one offer: the first SWAP_PICKS, in key order (ties in index
    # order), of those every resource goal accepts; screened a few at a time, as all at once.
    spec = ScenarioSpec(brokers=4, racks=0, topics=12, partitions_per_topic=(8, 20), skew=2.0, seed=seed)
    model = ClusterModel(generate(spec))
    options = PlannerOptions()
    goals = [g for g in default_goals(options) if isinstance(g, ResourceGoal)]
    ctx = goals[-1].search_context(model, goals[:-1], options)
    rng = np.random.default_rng(seed)
    a, b = (int(x) for x in np.argsort(model.util(0))[[-1, 0]])
    offer = int(model.partitions_on(a)[0])
    held = model.partitions_on(b)
    held_load = model.contrib_matrix(held, b)
    passing = np.flatnonzero(rng.random(len(held)) < 0.8)
    key = rng.integers(0, ties, size=len(passing)).astype(np.float64)
    bounds = swap_limits(a, b, ctx)[1]
    offer_load = model.contrib(offer, a)
    ordered = passing[np.argsort(key, kind="stable")]
    whole = ordered[swap_screen(offer_load[None, :] - held_load[ordered], bounds)][:SWAP_PICKS]
    held_cols = model.contrib_columns(held, b)  # one row per dimension, as the swap search keeps them
    assert first_passing(passing, key, offer_load, held_cols, bounds).tolist() == whole.tolist()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), empty=st.integers(0, 4))
def test_first_dests_are_the_masks_first_destinations_as_moves_change_the_loads(seed, empty):
    # ``first_dests`` walks the coldest brokers one at a time, along an order the model keeps in
    # step with its loads; where it settles, it gives what the masks over every broker give, for
    # each goal (those that prefer disk room included, with a disk line that binds) and to_short.
    # Empty brokers tie at 0: only the index order breaks those ties.
    spec = ScenarioSpec(
        brokers=30,
        racks=3,
        topics=12,
        partitions_per_topic=(8, 24),
        skew=1.5,
        size_sigma=1.0,
        new_empty_brokers=empty,
        heterogeneous_capacity=True,
        seed=seed,
    )
    model = ClusterModel(generate(spec))
    options = PlannerOptions()
    rng = np.random.default_rng(seed)
    goals = default_goals(options)
    settled = 0
    for i, goal in enumerate(goals):
        if not isinstance(goal, ResourceGoal):
            continue
        ctx = goal.search_context(model, goals[:i], options)
        ctx.disk_line = float(np.median(model.util(DISK)))
        for _ in range(60):
            for dim in (goal.dim, DISK):
                util = model.util(dim)
                order = np.argsort(util, kind="stable").tolist()
                assert model.coldest(dim) == [(util.item(b), b) for b in order if model.dest_ok[b]]
            a = int(rng.integers(model.n_brokers))
            on = model.partitions_on(a)
            if not len(on):
                continue
            p = int(on[rng.integers(len(on))])
            vec = model.contrib(p, a)
            for to_short in (False, True):
                got = first_dests(p, a, vec, ctx, to_short=to_short)
                masked = masked_dests(p, a, vec, ctx, to_short=to_short)
                assert got is None or got == masked, (goal.name, p, a, to_short)
                settled += got is not None
            dests = masked_dests(p, a, vec, ctx, to_short=False)
            if dests:
                model.apply(Move(REPLICA_MOVE, p, a, dests[int(rng.integers(len(dests)))]))
    assert settled > 0


def test_a_model_and_its_cold_orders_are_freed_without_the_garbage_collector():
    # The orders keep no reference to the model: a plan's model (a large one holds ~100 MB) goes
    # as its last user lets go, not at a later collection.
    model = ClusterModel(generate(ScenarioSpec(brokers=6, topics=4)))
    model.coldest(0)
    model.coldest(0, (DISK, 0.5))
    ref = weakref.ref(model)
    gc.disable()
    try:
        del model
        assert ref() is None
    finally:
        gc.enable()
