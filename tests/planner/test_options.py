from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from balancer.config import BalancerConfig
from balancer.planner import DistributionGoal, PlannerOptions


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"balance_threshold": 1.0}, "balance_threshold"),
        ({"capacity_threshold": 1.5}, "capacity_threshold"),
        ({"disk_balance_threshold": 0.9}, "disk_balance_threshold"),
        ({"max_bytes_to_move": 0}, "max_bytes_to_move"),
        ({"max_moves_per_broker": 2.5}, "max_moves_per_broker"),
        ({"excluded_topics": "("}, "excluded_topics"),
        ({"excluded_brokers": ["1"]}, "excluded_brokers"),
        ({"excluded_brokers": None}, "excluded_brokers"),
        ({"data_slack": -0.1}, "data_slack"),
        ({"data_slack": 1.5}, "data_slack"),
        ({"data_slack": True}, "data_slack"),
        ({"data_slack": "0.2"}, "data_slack"),
        ({"swap_data_cap": "yes"}, "swap_data_cap"),
        ({"swap_data_cap": 1}, "swap_data_cap"),
        ({"fill_data_first": "yes"}, "fill_data_first"),
        ({"fill_data_first": 0}, "fill_data_first"),
        ({"fill_disk_excess": "no"}, "fill_disk_excess"),
        ({"counts_first": 1}, "counts_first"),
    ],
)
def test_bad_values_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"PlannerOptions.{name}"):
        PlannerOptions(**kwargs)


def test_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        PlannerOptions(1.2)  # type: ignore[misc]
    options = PlannerOptions(excluded_brokers=[3, 1, 3])
    assert options.excluded_brokers == (1, 3)
    with pytest.raises(FrozenInstanceError):
        options.balance_threshold = 2.0  # type: ignore[misc]


def test_from_config():
    config = BalancerConfig(
        balance_threshold=1.2,
        excluded_topics="__.*",
        excluded_brokers=[4],
        max_bytes_to_move=10,
        data_slack=0.3,
        relax=False,
        swap_data_cap=True,
        fill_data_first=False,
        fill_disk_excess=True,
        counts_first=False,
    )
    options = PlannerOptions.from_config(config)
    assert options == PlannerOptions(
        balance_threshold=1.2,
        excluded_topics="__.*",
        excluded_brokers=(4,),
        max_bytes_to_move=10,
        data_slack=0.3,
        relax=False,
        swap_data_cap=True,
        fill_data_first=False,
        fill_disk_excess=True,
        counts_first=False,
    )
    assert options.topic_excluded("__consumer_offsets") and not options.topic_excluded("orders")


def test_disk_has_its_own_threshold_when_given():
    from balancer.planner import default_goals
    from balancer.planner.model import DISK, OUT

    def thresholds(options):
        return {g.dim: g.threshold for g in default_goals(options) if isinstance(g, DistributionGoal)}

    assert thresholds(PlannerOptions(balance_threshold=1.05))[DISK] == 1.05
    got = thresholds(PlannerOptions(balance_threshold=1.045, disk_balance_threshold=1.10))
    assert got[DISK] == 1.10 and got[OUT] == 1.045


def test_each_registered_soft_goal_carries_the_name_it_is_registered_under():
    from balancer.planner.goals import SOFT_GOAL_REGISTRY
    from balancer.vocabulary import SOFT_GOALS

    assert [SOFT_GOAL_REGISTRY[name].from_options(PlannerOptions()).name for name in SOFT_GOALS] == list(
        SOFT_GOALS
    )


def test_the_data_slack_a_search_uses_is_the_options_else_the_default():
    from balancer.planner import ClusterModel, NetworkInDistributionGoal
    from balancer.planner.search.constants import DATA_SLACK

    snap = {
        "cluster": "t",
        "brokers": [{"id": 0, "capacity": {"network_in": 1.0, "network_out": 1.0, "disk": 1.0}}],
        "partitions": [],
    }
    goal = NetworkInDistributionGoal(1.10)
    for options, slack in ((PlannerOptions(), DATA_SLACK), (PlannerOptions(data_slack=0), 0.0)):
        ctx = goal.search_context(ClusterModel(snap, options), (), options)
        assert ctx.data_slack == slack and isinstance(ctx.data_slack, float)
