"""Data first, moves second (search.cost): the cost a shed charges per move keeps its data within
DATA_SLACK of the least."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.planner.search.constants import COST_LADDER, COST_STEP, DATA_SLACK
from balancer.planner.search.cost import affordable, cover_data, least_cover, least_data, move_cost

candidates = st.lists(st.tuples(st.floats(1.0, 1e6), st.floats(0.01, 100.0)), min_size=1, max_size=60).map(
    lambda rows: (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
)


@settings(max_examples=200, deadline=None)
@given(cands=candidates, share=st.floats(0.01, 0.999), ceiling=st.floats(0.0, 1e6))
def test_the_cost_keeps_data_within_the_slack_of_the_least(cands, share, ceiling):
    size, relief = cands
    need = share * float(relief.sum())
    relief = np.minimum(relief, need)
    least = least_data(size, relief, need)
    # Any order's data is at least the fractional cover's.
    assert cover_data(size, relief, need) >= least * (1 - 1e-9)
    cost = move_cost(size, relief, need, ceiling, DATA_SLACK)
    assert 0.0 <= cost <= ceiling
    order = np.argsort(-relief / (size + cost), kind="stable")
    data = cover_data(size[order], relief[order], need)
    smallest = ceiling / COST_STEP**COST_LADDER
    assert data <= (1 + DATA_SLACK) * least * (1 + 1e-9) or cost == pytest.approx(smallest)


def test_a_cheap_cover_of_many_small_moves_beats_one_giant():
    # Ten small replicas relieve the need with 10 bytes; one giant does alone with 1000: data first.
    size = np.array([1.0] * 10 + [1000.0])
    relief = np.array([1.0] * 10 + [10.0])
    assert least_data(size, relief, 10.0) == pytest.approx(10.0)
    cost = move_cost(size, relief, 10.0, 100.0, DATA_SLACK)
    order = np.argsort(-relief / (size + cost), kind="stable")
    assert cover_data(size[order], relief[order], 10.0) == pytest.approx(10.0)
    # Where the giant is no worse in data, the one move wins.
    assert move_cost(np.array([1.0] * 10 + [10.0]), relief, 10.0, 100.0, DATA_SLACK) == 100.0


def test_the_cost_is_sized_without_the_giants_a_shed_passes_over():
    # Ten small replicas relieve the need with 10 bytes; a giant hotter than the need relieves it
    # alone with 1000, more than DATA_SLACK over the least: a data-first shed never takes it. Left
    # in, it ranks first at every large cost and drags the cost (and the move count) down; taken
    # out (``affordable``), the cost stays at the ceiling, the small replicas in relief order.
    size = np.array([1.0] * 10 + [1000.0])
    relief = np.array([1.0] * 10 + [10.0])
    keep = affordable(size, relief, 10.0, DATA_SLACK)
    assert keep.tolist() == [True] * 10 + [False]
    assert move_cost(size, relief, 10.0, 5000.0, DATA_SLACK) < 5000.0
    assert move_cost(size[keep], relief[keep], 10.0, 5000.0, DATA_SLACK) == 5000.0
    # A giant within the slack of the least is kept: it is the one-move cover.
    assert affordable(np.array([1.0] * 10 + [10.5]), relief, 10.0, DATA_SLACK).all()


small_sets = st.lists(st.tuples(st.floats(1.0, 1e3), st.floats(0.01, 100.0)), min_size=1, max_size=9).map(
    lambda rows: (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
)


@settings(max_examples=200, deadline=None)
@given(cands=small_sets, share=st.floats(0.01, 0.999))
def test_least_cover_is_a_bound_no_tighter_than_the_best_set_and_no_looser_than_the_fraction(cands, share):
    size, relief = cands
    need = share * float(relief.sum())
    best = min(
        float(size[list(chosen)].sum())
        for k in range(1, len(size) + 1)
        for chosen in itertools.combinations(range(len(size)), k)
        if relief[list(chosen)].sum() >= need
    )
    bound = least_cover(size, relief, need)
    assert least_data(size, np.minimum(relief, need), need) <= bound * (1 + 1e-9)
    assert bound <= best * (1 + 1e-9)
