"""A window's consumer figures: bytes/s per member from partition rates x assignment, ranked beside lag and
partition count; lag in records and bytes; consumption rates; membership churn."""

from __future__ import annotations

import pandas as pd
import pytest

from balancer.consumers.model import AdviceKind
from balancer.consumers.windows import Settings, window_figures
from consumers.builders import CLUSTER, at, group, member, polls, rates, snapshot

WINDOW = {"cluster": CLUSTER, "window_start": at(0), "window_end": at(300)}


def figures(reads, partition_rates, **kwargs):
    return window_figures(reads, partition_rates, **WINDOW, **kwargs)


def test_members_are_ranked_by_the_bytes_they_must_consume_beside_partition_count():
    # a holds three cold partitions, b one hot one: by count a is first, by traffic b.
    assigned = group([member("a-1", ("t", 0), ("t", 1), ("t", 2)), member("b-1", ("t", 3))])
    result = figures(
        polls(snapshot(10, assigned)), rates({("t", 0): 100, ("t", 1): 100, ("t", 2): 100, ("t", 3): 900})
    )
    ranked = {m["client_id"]: m for m in result.ranking}
    assert ranked["b"]["bytes_per_sec"] == 900 and ranked["a"]["bytes_per_sec"] == 300
    assert (ranked["b"]["rank_by_traffic"], ranked["b"]["rank_by_partitions"]) == (1, 2)
    assert (ranked["a"]["rank_by_traffic"], ranked["a"]["rank_by_partitions"]) == (2, 1)
    (g,) = result.groups
    assert g["fair_share"] == 600 and g["traffic_skew"] == pytest.approx(1.5)
    assert g["partition_skew"] == pytest.approx(1.5)


def test_a_partition_without_a_rate_is_counted_unrated_not_read_as_zero():
    assigned = group([member("a-1", ("t", 0), ("u", 0)), member("b-1", ("t", 1))])
    result = figures(polls(snapshot(10, assigned)), rates({("t", 0): 100, ("t", 1): 100}))
    ranked = {m["client_id"]: m for m in result.ranking}
    assert ranked["a"]["unrated_partitions"] == 1 and ranked["b"]["unrated_partitions"] == 0
    assert next(p for p in result.lag if p["topic"] == "u")["bytes_per_sec"] is None


def test_lag_in_records_and_bytes_and_consumption_rate_from_the_window_reads():
    # Baseline before the window, one read inside: 100 s apart; 200-byte records.
    holder = [member("a-1", ("t", 0))]
    first = snapshot(-50, group(holder, committed={("t", 0): 1_000}), end={("t", 0): 1_500})
    last = snapshot(50, group(holder, committed={("t", 0): 3_000}), end={("t", 0): 4_000})
    (row,) = figures(polls(first, last), rates({("t", 0): 4_000}, record_bytes=200)).lag
    assert row["lag_records"] == 1_000 and row["lag_bytes"] == 200_000
    assert row["lag_growth"] == 500
    assert row["consumed_records_per_sec"] == 20 and row["consumed_bytes_per_sec"] == 4_000
    assert row["produced_records_per_sec"] == 25
    assert row["bytes_per_sec"] == 4_000


def test_reads_before_the_baseline_and_from_other_clusters_are_ignored():
    holder = [member("a-1", ("t", 0))]
    old = snapshot(-200, group(holder, committed={("t", 0): 0}), end={("t", 0): 0})
    base = snapshot(-50, group(holder, committed={("t", 0): 1_000}), end={("t", 0): 1_000})
    last = snapshot(50, group(holder, committed={("t", 0): 2_000}), end={("t", 0): 2_000})
    frame = polls(old, base, last)
    other = polls(snapshot(60, group(holder, committed={("t", 0): 0}), end={("t", 0): 9_999}))
    other["cluster"] = "elsewhere"
    (row,) = figures(pd.concat([frame, other]), rates({("t", 0): 10})).lag
    assert row["consumed_records_per_sec"] == 10 and row["end_offset"] == 2_000


def test_a_group_read_only_before_the_window_has_no_figures_in_it():
    assert figures(polls(snapshot(-10, group([member("a-1", ("t", 0))]))), rates({})).groups == []


def test_dynamic_restarts_are_membership_changes_and_rejoins_static_ones_are_neither():
    dynamic = [
        snapshot(s, group([member(f"a-{i}", ("t", 0), client="a"), member("b-1", ("t", 1))]))
        for i, s in enumerate((10, 20, 30))
    ]
    (g,) = figures(polls(*dynamic), rates({})).groups
    assert (g["membership_changes"], g["rejoins"], g["rejoined_client"]) == (2, 2, "a")

    static = [
        snapshot(s, group([member(f"a-{i}", ("t", 0), client="a", instance="a"), member("b-1", ("t", 1))]))
        for i, s in enumerate((10, 20, 30))
    ]
    (g,) = figures(polls(*static), rates({})).groups
    assert (g["membership_changes"], g["rejoins"], g["static_members"]) == (0, 0, 1)


def test_a_new_member_of_another_client_is_a_change_but_not_a_rejoin():
    before = snapshot(10, group([member("a-1", ("t", 0), ("t", 1))]))
    after = snapshot(20, group([member("a-1", ("t", 0)), member("b-1", ("t", 1))]))
    (g,) = figures(polls(before, after), rates({})).groups
    assert (g["membership_changes"], g["rejoins"]) == (1, 0)


def test_an_even_group_is_not_flagged_and_gets_no_advice():
    even = group([member("a-1", ("t", 0), ("t", 1)), member("b-1", ("t", 2), ("t", 3))])
    result = figures(polls(snapshot(10, even)), rates({("t", p): 500 for p in range(4)}))
    (g,) = result.groups
    assert g["traffic_skew"] == 1.0
    assert (g["is_skewed"], g["flagged"], g["advice"]) == (False, False, [])
    assert result.advice == [] and not any(m["is_hot"] for m in result.ranking)


def test_skew_over_the_threshold_flags_the_group_and_its_busiest_member():
    skewed = group([member("a-1", ("t", 0)), member("b-1", ("t", 1))], assignor="roundrobin")
    result = figures(polls(snapshot(10, skewed)), rates({("t", 0): 700, ("t", 1): 300}))
    (g,) = result.groups
    assert g["traffic_skew"] == pytest.approx(1.4)
    assert not g["flagged"]  # 1.4 is within the default 1.5
    flagged = figures(
        polls(snapshot(10, skewed)),
        rates({("t", 0): 700, ("t", 1): 300}),
        settings=Settings(balance_threshold=1.3),
    )
    (g,) = flagged.groups
    assert g["is_skewed"] and g["flagged"] and g["advice"] == [AdviceKind.HOT_PARTITION]
    assert [m["client_id"] for m in flagged.ranking if m["is_hot"]] == ["a"]
