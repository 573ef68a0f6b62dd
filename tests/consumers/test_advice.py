"""Advice per flagged group names its cause and the consumer (or partition) it concerns."""

from __future__ import annotations

import pandas as pd

from balancer.consumers.advice import RECOMMENDATIONS
from balancer.consumers.model import AdviceKind
from balancer.consumers.windows import Settings, window_figures
from balancer.execution.advice import ORDERING_CAVEAT
from consumers.builders import CLUSTER, at, group, member, polls, rates, snapshot


def advice(reads, partition_rates, *, history=None, settings=None, start=0):
    result = window_figures(
        reads,
        partition_rates,
        cluster=CLUSTER,
        window_start=at(start),
        window_end=at(start + 300),
        history=history,
        settings=settings or Settings(),
    )
    return {AdviceKind(a["kind"]): a for a in result.advice}, result


def test_more_members_than_partitions_names_an_idle_member():
    members = [member("a-1", ("t", 0)), member("b-1", ("t", 1)), member("c-1"), member("d-1")]
    found, _ = advice(
        polls(snapshot(10, group(members, assignor="roundrobin"))), rates({("t", 0): 500, ("t", 1): 500})
    )
    assert found[AdviceKind.IDLE_MEMBERS]["client_id"] in {"c", "d"}
    assert found[AdviceKind.IDLE_MEMBERS]["figure"] == 2


def test_a_hot_partition_over_the_fair_share_names_it_and_its_consumer_with_the_ordering_caveat():
    members = [member("a-1", ("t", 0), ("t", 1)), member("b-1", ("t", 2)), member("c-1", ("t", 3))]
    load = {("t", 0): 100, ("t", 1): 100, ("t", 2): 100, ("t", 3): 2_000}
    found, result = advice(polls(snapshot(10, group(members, assignor="cooperative-sticky"))), rates(load))
    assert set(found) == {AdviceKind.HOT_PARTITION}
    hot = found[AdviceKind.HOT_PARTITION]
    assert (hot["client_id"], hot["topic"], hot["partition"]) == ("c", "t", 3)
    assert ORDERING_CAVEAT in hot["recommendation"]
    (g,) = result.groups
    assert g["advice"] == ["hot_partition"] and g["flagged"]


def test_range_over_two_topics_names_the_member_holding_the_extra_partitions():
    # Range places each topic alone: both single-partition topics go to the first member.
    members = [member("a-1", ("t", 0), ("u", 0)), member("b-1")]
    found, _ = advice(
        polls(snapshot(10, group(members, assignor="range"))), rates({("t", 0): 300, ("u", 0): 300})
    )
    assert set(found) == {AdviceKind.RANGE_MULTI_TOPIC}
    assert found[AdviceKind.RANGE_MULTI_TOPIC]["client_id"] == "a"
    assert "cooperative-sticky" in found[AdviceKind.RANGE_MULTI_TOPIC]["recommendation"]
    assert "group.protocol=consumer" in found[AdviceKind.RANGE_MULTI_TOPIC]["recommendation"]


def test_the_same_placement_under_another_assignor_is_an_uneven_assignment_of_the_busiest_member():
    members = [member("a-1", ("t", 0), ("t", 1)), member("b-1", ("t", 2), ("t", 3))]
    load = {("t", 0): 500, ("t", 1): 500, ("t", 2): 50, ("t", 3): 50}
    found, _ = advice(polls(snapshot(10, group(members, assignor="roundrobin"))), rates(load))
    assert set(found) == {AdviceKind.UNEVEN_ASSIGNMENT}
    assert found[AdviceKind.UNEVEN_ASSIGNMENT]["client_id"] == "a"


def _restarts(start: float, instance: str | None = None):
    """a restarts twice in the window (a new member id each time), b stays."""
    return [
        snapshot(
            start + s,
            group(
                [member(f"a-{start + s}", ("t", 0), client="a", instance=instance), member("b-1", ("t", 1))]
            ),
        )
        for s in (10, 20, 30)
    ]


def _history(changes: int, rejoins: int) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "group_id": "g",
                "window_end": at(0),
                "membership_changes": changes,
                "rejoins": rejoins,
                "rejoined_client": "a" if rejoins else None,
            }
        ]
    )


def test_members_rejoining_under_new_ids_window_after_window_are_a_rebalance_storm():
    found, _ = advice(polls(*_restarts(300)), rates({}), history=_history(2, 2), start=300)
    storm = found[AdviceKind.REBALANCE_STORM]
    assert storm["client_id"] == "a" and storm["figure"] == 2
    assert "group.instance.id" in storm["recommendation"] and "session.timeout.ms" in storm["recommendation"]


def test_churn_in_one_window_only_is_not_a_storm():
    found, result = advice(polls(*_restarts(300)), rates({}), history=_history(0, 0), start=300)
    assert AdviceKind.REBALANCE_STORM not in found
    assert result.groups[0]["membership_changes"] == 2  # the churn is there, one window of it


def test_static_members_restarting_are_no_storm():
    found, result = advice(polls(*_restarts(300, instance="a")), rates({}), history=_history(2, 0), start=300)
    assert AdviceKind.REBALANCE_STORM not in found
    assert result.groups[0]["membership_changes"] == 0


def _lagging(growth: int):
    members = [member("a-1", ("t", 0)), member("b-1", ("t", 1))]
    first = snapshot(
        10, group(members, committed={("t", 0): 0, ("t", 1): 50}), end={("t", 0): 1_000, ("t", 1): 50}
    )
    last = snapshot(
        200,
        group(members, committed={("t", 0): 500, ("t", 1): 50}),
        end={("t", 0): 1_500 + growth, ("t", 1): 50},
    )
    return polls(first, last)


def test_lag_growing_on_one_member_while_another_has_nothing_to_consume():
    found, _ = advice(_lagging(5_000), rates({("t", 0): 100, ("t", 1): 0}))
    growing = found[AdviceKind.LAG_GROWING_IDLE]
    assert growing["client_id"] == "a" and growing["figure"] == 5_000
    assert "b (b-1" in growing["detail"]


def test_lag_growing_less_than_min_lag_growth_is_not_advised():
    found, _ = advice(_lagging(500), rates({("t", 0): 100, ("t", 1): 0}))
    assert AdviceKind.LAG_GROWING_IDLE not in found


def test_every_kind_has_a_recommendation():
    assert set(RECOMMENDATIONS) == set(AdviceKind)


def test_a_partition_just_over_the_fair_share_is_a_hot_partition():
    # 1000 B/s over three members: 333 each; t-0 alone carries 500 (1.5x), its member 800.
    members = [member("a-1", ("t", 0), ("t", 1)), member("b-1", ("t", 2)), member("c-1", ("t", 3))]
    load = {("t", 0): 500, ("t", 1): 300, ("t", 2): 100, ("t", 3): 100}
    found, _ = advice(polls(snapshot(10, group(members, assignor="roundrobin"))), rates(load))
    assert found[AdviceKind.HOT_PARTITION]["partition"] == 0
    assert found[AdviceKind.HOT_PARTITION]["figure"] == 1.5


def test_churn_window_after_window_without_rejoins_is_scaling_not_a_storm():
    # A new client joins in this window, as one did in the last: changes, but nobody rejoined.
    reads = [
        snapshot(310, group([member("a-1", ("t", 0), ("t", 1))])),
        snapshot(320, group([member("a-1", ("t", 0)), member("b-1", ("t", 1))])),
    ]
    found, result = advice(polls(*reads), rates({}), history=_history(1, 0), start=300)
    assert result.groups[0]["membership_changes"] == 1
    assert AdviceKind.REBALANCE_STORM not in found


def test_two_topics_on_one_member_under_a_sticky_assignor_is_not_blamed_on_range():
    # The placement of the range test, kept by a sticky assignment (from when a was alone).
    members = [member("a-1", ("t", 0), ("u", 0)), member("b-1")]
    reads = polls(snapshot(10, group(members, assignor="cooperative-sticky")))
    found, _ = advice(reads, rates({("t", 0): 300, ("u", 0): 300}))
    assert set(found) == {AdviceKind.UNEVEN_ASSIGNMENT}
    assert found[AdviceKind.UNEVEN_ASSIGNMENT]["client_id"] == "a"


def test_a_storm_names_the_rejoining_client_even_when_it_is_away_at_the_last_read():
    away = snapshot(340, group([member("b-1", ("t", 0), ("t", 1))]))
    found, _ = advice(polls(*_restarts(300), away), rates({}), history=_history(2, 2), start=300)
    storm = found[AdviceKind.REBALANCE_STORM]
    assert (storm["client_id"], storm["member_id"]) == ("a", None)
