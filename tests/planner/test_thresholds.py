"""Per-resource thresholds, low-utilization thresholds and the choice/order of soft goals."""

from __future__ import annotations

import pytest

from balancer.config import load_config
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import DistributionGoal, PlannerOptions, default_goals, plan
from balancer.planner.validate import check_plan

# Generated clusters run at 0.4 network and 0.5 disk utilization.
SPEC = ScenarioSpec(brokers=6, racks=3, topics=30, partitions_per_topic=(4, 24), new_empty_brokers=2, seed=31)
GOAL = {
    "network_in": "network_in_distribution",
    "network_out": "network_out_distribution",
    "disk": "disk_distribution",
    "replicas": "replicas_distribution",
    "leaders": "leaders_distribution",
}


@pytest.fixture(scope="module")
def snapshot():
    return generate(SPEC)


def _digest(result):
    return (result.to_reassignment(), result.to_election())


@pytest.mark.parametrize("resource", sorted(GOAL))
def test_each_balance_key_changes_the_plan(snapshot, resource):
    if resource == "leaders":  # leaderships only: a broker that lost its leaderships, not empty brokers
        snapshot = generate(
            ScenarioSpec(
                brokers=6, racks=3, topics=30, partitions_per_topic=(4, 24), restarted_broker=2, seed=31
            )
        )
    only = (GOAL[resource],)
    loose = plan(snapshot, PlannerOptions(goals=only, thresholds={resource: 3.0}))
    tight = plan(snapshot, PlannerOptions(goals=only, thresholds={resource: 1.05}))
    assert check_plan(snapshot, tight) == [] and check_plan(snapshot, loose) == []
    assert _digest(loose) != _digest(tight)
    assert len(tight.actions) > len(loose.actions)


@pytest.mark.parametrize("resource, util", [("network_in", 0.4), ("network_out", 0.4), ("disk", 0.5)])
def test_a_resource_under_its_low_utilization_is_left_alone(snapshot, resource, util):
    only = (GOAL[resource],)
    acting = plan(snapshot, PlannerOptions(goals=only, low_utilization={resource: util - 0.05}))
    idle = plan(snapshot, PlannerOptions(goals=only, low_utilization={resource: util + 0.05}))
    assert acting.actions and not idle.actions
    assert idle.after == idle.before


def test_an_idle_goal_vetoes_nothing(snapshot):
    # Disk first and idle: network_in after it may move data however disk ends up.
    order = ("disk_distribution", "network_in_distribution")
    alone = plan(snapshot, PlannerOptions(goals=order[1:]))
    idle_first = plan(snapshot, PlannerOptions(goals=order, low_utilization={"disk": 0.9}))
    assert _digest(alone) == _digest(idle_first)


def test_goals_choose_and_order_the_soft_goals(snapshot):
    assert not plan(snapshot, PlannerOptions(goals=())).actions  # hard goals only: nothing to fix here
    names = [
        g.name
        for g in default_goals(PlannerOptions(goals=("leaders_distribution", "disk_distribution")))
        if isinstance(g, DistributionGoal)
    ]
    assert names == ["leaders_distribution", "disk_distribution"]
    a = plan(snapshot, PlannerOptions(goals=("network_in_distribution", "disk_distribution")))
    b = plan(snapshot, PlannerOptions(goals=("disk_distribution", "network_in_distribution")))
    assert _digest(a) != _digest(b)


def test_defaults_keep_todays_thresholds_and_give_disk_a_low_utilization():
    options = PlannerOptions(balance_threshold=1.2)
    assert [options.threshold(r) for r in GOAL] == [1.2] * 5
    assert options.low_utilization_of("disk") == 0.2 and options.low_utilization_of("network_in") == 0.0
    assert PlannerOptions(disk_balance_threshold=1.3).threshold("disk") == 1.3
    assert PlannerOptions(disk_balance_threshold=1.3, thresholds={"disk": 1.4}).threshold("disk") == 1.4


def test_from_config_reads_the_yaml_keys():
    config = load_config(
        None,
        [
            "balancer.thresholds.network_out.balance=1.3",
            "balancer.thresholds.disk.low_utilization=0.6",
            'balancer.goals=["disk_distribution"]',
        ],
    )
    options = PlannerOptions.from_config(config.balancer)
    assert options.threshold("network_out") == 1.3 and options.threshold("network_in") == 1.10
    assert options.low_utilization_of("disk") == 0.6 and options.goals == ("disk_distribution",)
    assert PlannerOptions.from_config(load_config().balancer).low_utilization_of("disk") == 0.2


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"thresholds": {"disk": 1.0}}, "thresholds['disk']"),
        ({"thresholds": {"cpu": 1.2}}, "thresholds['cpu']"),
        ({"low_utilization": {"disk": 1.5}}, "low_utilization['disk']"),
        ({"low_utilization": {"leaders": 0.3}}, "low_utilization['leaders']"),
        ({"goals": ("nope",)}, "goals"),
        ({"goals": ("disk_distribution", "disk_distribution")}, "goals"),
        ({"thresholds": [1.2]}, "thresholds"),
    ],
)
def test_bad_threshold_options_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"PlannerOptions.{name}".replace("[", r"\[")):
        PlannerOptions(**kwargs)


def test_options_stay_immutable_hashable_and_picklable():
    import pickle

    options = PlannerOptions(thresholds={"disk": 1.2}, low_utilization={"disk": 0.5}, drain_brokers=[3])
    assert pickle.loads(pickle.dumps(options)) == options
    assert hash(options) == hash(
        PlannerOptions(thresholds={"disk": 1.2}, low_utilization={"disk": 0.5}, drain_brokers=(3,))
    )
    with pytest.raises(TypeError):
        options.thresholds["disk"] = 2.0  # type: ignore[index]
