"""Planning inside the job without Spark: the frames (columnar) path gives what the dict path gives.

``plan_group`` gets pandas frames from ``applyInPandas``; it now reads them column by column
into the planner's arrays (``build_snapshot_frames`` -> ``ColumnarSnapshot`` -> ``ClusterModel``)
instead of a dict per row. Same input, same snapshot, same problems, same errors, same plan.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from balancer.config import load_config
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import ClusterModel, SnapshotError, plan
from balancer.planner.model import ColumnarSnapshot
from balancer.snapshot import build_snapshot, build_snapshot_frames, frame_records
from balancer.spark.plan import planning

WS, WE = pd.Timestamp("2026-01-01 00:00"), pd.Timestamp("2026-01-01 00:05")


def frames(snapshot: dict, *, noise: float = 0.03, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """partition_load / broker_load rows as applyInPandas hands them over (dtypes of Spark 4.1),
    rates jittered like SimulatedCluster's telemetry, rows shuffled."""
    rng = np.random.default_rng(seed)
    parts = snapshot["partitions"]
    n = len(parts)
    jitter = np.maximum(0.0, 1.0 + rng.normal(0.0, noise, (2, n)))
    prows = (
        pd.DataFrame(
            {
                "cluster": pd.Series([snapshot["cluster"]] * n, dtype="str"),
                "window_start": pd.Series([WS] * n, dtype="datetime64[ns]"),
                "window_end": pd.Series([WE] * n, dtype="datetime64[ns]"),
                "topic": pd.Series([p["topic"] for p in parts], dtype="str"),
                "partition": np.array([p["partition"] for p in parts], dtype=np.int32),
                "leader": np.array([p["leader"] for p in parts], dtype=np.int32),
                "replicas": pd.Series([np.array(p["replicas"], dtype=np.int32) for p in parts], dtype=object),
                "replication_factor": np.array([len(p["replicas"]) for p in parts], dtype=np.int32),
                "bytes_in": np.array([p["bytes_in"] for p in parts]) * jitter[0],
                "bytes_out": np.array([p["bytes_out"] for p in parts]) * jitter[1],
                "messages_in": np.ones(n),
                "size": np.array([float(p["size"]) for p in parts]),
                "samples": np.full(n, 5, dtype=np.int64),
                "reporting_replicas": np.array([len(p["replicas"]) for p in parts], dtype=np.int32),
            }
        )
        .iloc[rng.permutation(n)]
        .reset_index(drop=True)
    )
    brokers = snapshot["brokers"]
    nb = len(brokers)
    brows = (
        pd.DataFrame(
            {
                "cluster": pd.Series([snapshot["cluster"]] * nb, dtype="str"),
                "window_start": pd.Series([WS] * nb, dtype="datetime64[ns]"),
                "window_end": pd.Series([WE] * nb, dtype="datetime64[ns]"),
                "broker": np.array([b["id"] for b in brokers], dtype=np.int32),
                "rack": pd.Series([b.get("rack") for b in brokers], dtype="str"),
                **{
                    f"capacity_{r}": np.array([b["capacity"][r] for b in brokers], dtype=np.float64)
                    for r in ("network_in", "network_out", "disk")
                },
                "cpu": np.full(nb, 0.5),
            }
        )
        .iloc[rng.permutation(nb)]
        .reset_index(drop=True)
    )
    return prows, brows


@pytest.fixture(scope="module")
def cluster() -> dict:
    return generate(
        ScenarioSpec(
            brokers=9,
            racks=3,
            topics=40,
            partitions_per_topic=(2, 24),
            skew=1.0,
            new_empty_brokers=1,
            seed=11,
            cluster="small",
        )
    )


@pytest.fixture(scope="module")
def balancer():
    return load_config().balancer


def both(prows: pd.DataFrame, brows: pd.DataFrame):
    """The dict path's snapshot and the frames path's, which must have read the frames vectorized: its
    fallback for frames it cannot read is the dict path itself, and would be compared with itself."""
    old = build_snapshot("small", frame_records(prows), frame_records(brows))
    new = build_snapshot_frames("small", prows, brows)
    assert isinstance(new.snapshot, ColumnarSnapshot), "the frames path fell back to the dict path"
    return old, new


def _model_arrays(model: ClusterModel) -> dict:
    return {
        k: getattr(model, k)
        for k in (
            "broker_ids",
            "rack",
            "cap",
            "topics",
            "partition_ids",
            "replicas",
            "leader",
            "rf",
            "bytes_in",
            "bytes_out",
            "size",
            "leader_out",
            "load",
            "movable",
            "dest_ok",
            "move_overhead",
            "n_racks",
            "rack_names",
            "index",
        )
    }


def _assert_same_model(a: ClusterModel, b: ClusterModel) -> None:
    for (key, x), y in zip(_model_arrays(a).items(), _model_arrays(b).values()):
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), key
        else:
            assert x == y, key


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_snapshot_model_and_plan_from_frames_as_from_dicts(cluster, balancer, seed):
    prows, brows = frames(cluster, seed=seed)
    old, new = both(prows, brows)
    assert new.problems == old.problems == ()
    assert new.snapshot.to_dict() == old.snapshot
    _assert_same_model(ClusterModel(old.snapshot), ClusterModel(new.snapshot))

    row_old = planning.plan_window("small", WS, WE, frame_records(prows), frame_records(brows), balancer)
    row_new = planning.plan_frames("small", WS, WE, prows, brows, balancer)
    assert row_old["status"] == "proposed" and row_old["actions"]
    for key in row_old:
        if key != "created_at":
            assert row_new[key] == row_old[key], key


def test_plan_group_gives_the_dict_paths_row(cluster, balancer):
    prows, brows = frames(cluster, seed=5)
    both(prows, brows)  # plan_group reads these frames vectorized
    brows = brows.assign(_blocked=pd.Series([None] * len(brows), dtype="str"))
    out = planning.plan_group(("small", WS, WE), prows, brows, balancer)
    expected = planning.plan_window(
        "small", WS, WE, frame_records(prows), frame_records(brows.drop(columns=["_blocked"])), balancer
    )
    assert list(out.columns) == planning.PLAN_RESULT_SCHEMA.names and len(out) == 1
    got = out.iloc[0].to_dict()
    for key in expected:
        if key != "created_at":
            assert got[key] == expected[key], key


def test_missing_values_and_stale_leaders_are_read_the_same_way(cluster, balancer):
    prows, brows = frames(cluster, seed=3)
    # As Spark hands a nullable INT with nulls: float64 with NaN.
    leader = prows["leader"].astype(np.float64)
    leader[::7] = np.nan
    leader[3::11] = 999.0  # not among the replicas: first replica
    prows = prows.assign(leader=leader)
    prows.loc[::5, "bytes_in"] = np.nan  # missing rate: 0
    prows.loc[::6, "size"] = np.nan
    brows = brows.assign(rack=brows["rack"].where(brows["broker"] != 2))  # a broker without a rack
    old, new = both(prows, brows)
    assert new.snapshot.to_dict() == old.snapshot
    _assert_same_model(ClusterModel(old.snapshot), ClusterModel(new.snapshot))
    row_old = planning.plan_window("small", WS, WE, frame_records(prows), frame_records(brows), balancer)
    row_new = planning.plan_frames("small", WS, WE, prows, brows, balancer)
    assert row_new["actions"] == row_old["actions"]


def test_same_problems(cluster, balancer):
    prows, brows = frames(cluster, seed=4)
    silent = brows.copy()
    silent.loc[silent["broker"] == 3, "capacity_disk"] = np.nan
    old, new = both(prows, silent)
    assert new.problems == old.problems and "broker(s) 3" in new.problems[0]
    row = planning.plan_frames("small", WS, WE, prows, silent, balancer)
    assert row["status"] == "skipped" and "broker(s) 3" in row["reason"]
    old, new = both(prows.iloc[:0], brows.iloc[:0])
    assert (
        new.problems
        == old.problems
        == ("no partition reports in this window", "no broker reported its capacity in this window")
    )
    row = planning.plan_frames("small", WS, WE, prows, brows, balancer, blocked_reason="contract failed")
    assert row["status"] == "skipped" and row["reason"] == "contract failed"


def _message(snapshot) -> str:
    with pytest.raises(SnapshotError) as info:
        ClusterModel(snapshot)
    return str(info.value)


@pytest.mark.parametrize(
    "change",
    [
        "unknown_broker",
        "duplicate_replica",
        "listed_twice",
        "zero_capacity",
        "negative_rate",
        "infinite_size",
        "duplicate_broker",
    ],
)
def test_a_malformed_columnar_snapshot_fails_with_the_dict_snapshots_message(cluster, change):
    prows, brows = frames(cluster, seed=6)
    if change == "unknown_broker":
        brows = brows[brows["broker"] != 5]  # hosts replicas, no broker_load row at all
    elif change == "duplicate_replica":
        reps = prows["replicas"].copy()
        reps.iloc[4] = np.array([reps.iloc[4][0]] * 2 + list(reps.iloc[4][2:]), dtype=np.int32)
        prows = prows.assign(replicas=reps)
    elif change == "listed_twice":
        prows = pd.concat([prows, prows.iloc[[7]]], ignore_index=True)
    elif change == "zero_capacity":
        brows = brows.assign(
            capacity_network_out=brows["capacity_network_out"].where(brows["broker"] != 4, 0.0)
        )
    elif change == "negative_rate":
        prows.loc[8, "bytes_out"] = -1.0
    elif change == "infinite_size":
        prows.loc[9, "size"] = np.inf
    elif change == "duplicate_broker":
        brows = pd.concat([brows, brows.iloc[[0]]], ignore_index=True)
    old, new = both(prows, brows)
    assert new.snapshot.to_dict() == old.snapshot
    message = _message(old.snapshot)
    assert _message(new.snapshot) == message
    with pytest.raises(SnapshotError, match="^" + __import__("re").escape(message) + "$"):
        plan(new.snapshot)


def test_columnar_snapshot_reads_as_the_dict_snapshot():
    snap = ColumnarSnapshot(
        cluster="c",
        broker_ids=[2, 1],
        racks=["a", None],
        capacity=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
        topics=["t", "t"],
        partition_ids=[0, 1],
        replica_counts=[2, 1],
        replicas_flat=[1, 2, 2],
        leader=[2, 2],
        bytes_in=[1.0, 0.0],
        bytes_out=[2.0, 0.0],
        size=[3.0, 4.0],
    )
    assert dict(snap) == {
        "cluster": "c",
        "brokers": [
            {"id": 2, "capacity": {"network_in": 1.0, "network_out": 2.0, "disk": 3.0}, "rack": "a"},
            {"id": 1, "capacity": {"network_in": 4.0, "network_out": 5.0, "disk": 6.0}},
        ],
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "replicas": [1, 2],
                "leader": 2,
                "bytes_in": 1.0,
                "bytes_out": 2.0,
                "size": 3.0,
            },
            {
                "topic": "t",
                "partition": 1,
                "replicas": [2],
                "leader": 2,
                "bytes_in": 0.0,
                "bytes_out": 0.0,
                "size": 4.0,
            },
        ],
    }
    _assert_same_model(ClusterModel(snap), ClusterModel(snap.to_dict()))
    assert snap.get("missing") is None and set(snap) == {"cluster", "brokers", "partitions"}


def test_the_planner_needs_only_the_columns_plans_sends_it(cluster, balancer):
    prows, brows = frames(cluster, seed=7)
    keys = ["cluster", "window_start", "window_end"]
    brows = brows.assign(_blocked=pd.Series([None] * len(brows), dtype="str"))
    full = planning.plan_group(("small", WS, WE), prows, brows, balancer).iloc[0].to_dict()
    narrow = (
        planning.plan_group(
            ("small", WS, WE),
            prows[[*keys, *planning.PARTITION_INPUT]],
            brows[[*keys, *planning.BROKER_INPUT, "_blocked"]],
            balancer,
        )
        .iloc[0]
        .to_dict()
    )
    assert full["status"] == "proposed"
    for key in full:
        if key != "created_at":
            assert narrow[key] == full[key], key
