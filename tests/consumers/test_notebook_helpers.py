"""The frame helpers balancer/notebook.py gives the consumer_balance notebook (pure pandas)."""

from __future__ import annotations

import pandas as pd

from balancer import notebook as nb


def test_newest_window_keeps_each_groups_latest_rows():
    frame = pd.DataFrame(
        {
            "cluster": "c",
            "group_id": ["g", "g", "g", "h"],
            "window_end": [1, 2, 2, 1],
            "member_id": list("abcd"),
        }
    )
    assert nb.newest_window(frame).member_id.tolist() == ["b", "c", "d"]


def test_traffic_beside_count_gives_each_members_share_of_bytes_and_of_partitions():
    ranking = pd.DataFrame(
        {
            "cluster": "c",
            "group_id": "g",
            "window_end": 1,
            "client_id": ["a", "b"],
            "member_id": ["m-aaaaaa", "m-bbbbbb"],
            "bytes_per_sec": [100.0, 300.0],
            "partitions": [3, 1],
        }
    )
    shares = nb.traffic_beside_count(ranking)
    assert shares[["member", "measure", "share"]].values.tolist() == [
        ["a aaaaaa", "partitions", 0.75],
        ["a aaaaaa", "traffic", 0.25],
        ["b bbbbbb", "partitions", 0.25],
        ["b bbbbbb", "traffic", 0.75],
    ]


def test_a_group_without_traffic_has_zero_shares_not_nan():
    ranking = pd.DataFrame(
        {
            "cluster": "c",
            "group_id": "g",
            "window_end": 1,
            "client_id": ["a"],
            "member_id": ["m-1"],
            "bytes_per_sec": [0.0],
            "partitions": [0],
        }
    )
    assert nb.traffic_beside_count(ranking).share.tolist() == [0.0, 0.0]
