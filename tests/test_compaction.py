"""A lakehouse that stays fast after months: the job compacts small files without breaking time travel,
and a window close reads only the topology rows committed since the last one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from balancer.cli.main import main as balancer_cli
from balancer.spark.lakehouse import Compactor, Lakehouse, arrow_schema
from balancer.spark.land.topology import TopologySlice
from balancer.spark.windows import cc_loads

pytestmark = pytest.mark.integration

T = datetime(2026, 3, 1, tzinfo=UTC)


def _plans(batch: int) -> pa.Table:
    row = {
        "plan_id": f"p{batch}",
        "cluster": "c",
        "window_end": T + timedelta(minutes=5 * batch),
        "status": "balanced",
    }
    return pa.Table.from_pylist([row], schema=arrow_schema("balance_plans"))


def test_compaction_keeps_every_version_readable_and_appends_idempotent(spark, tmp_path, capsys):
    house = Lakehouse(spark, tmp_path / "lh", engine="delta-rs")
    house.create_all()
    versions = []
    for batch in range(5):
        assert house.append("balance_plans", _plans(batch), app_id="job", batch_id=batch)
        versions.append(DeltaTable(house.path("balance_plans")).version())
    before = {
        v: sorted(r["plan_id"] for r in house.read("balance_plans", as_of=v).collect()) for v in versions
    }

    now = [0.0]
    compactor = Compactor(house, interval=60.0, clock=lambda: now[0])
    assert compactor.maybe_run() is None  # not due yet
    now[0] = 61.0
    removed = compactor.maybe_run()
    assert removed is not None and removed["balance_plans"] == 5
    assert len(DeltaTable(house.path("balance_plans")).file_uris()) == 1

    # Every version reads as before, the latest holds every row once, a replayed batch still writes nothing.
    assert {
        v: sorted(r["plan_id"] for r in house.read("balance_plans", as_of=v).collect()) for v in versions
    } == before
    assert sorted(r["plan_id"] for r in house.read("balance_plans").collect()) == [f"p{b}" for b in range(5)]
    assert not house.append("balance_plans", _plans(4), app_id="job", batch_id=4)
    # The audit still finds the commit that added a plan (not the compaction's).
    code = balancer_cli(
        [
            "history",
            "--set",
            f"lakehouse.path={tmp_path / 'lh'}",
            "--set",
            "lakehouse.engine=delta-rs",
            "--plan",
            "p2",
        ]
    )
    assert code == 0
    assert f"committed to balance_plans in version {versions[2]} at" in capsys.readouterr().out


def _shape(frame) -> list:
    return sorted((r["partition"], list(r["replicas"]), r["leader"]) for r in frame.collect())


def _topology(at: datetime, changes: dict[int, list[int]]) -> pa.Table:
    rows = [
        {
            "cluster": "c",
            "observed_at": at,
            "topic": "t",
            "partition": p,
            "replicas": r,
            "leader": r[0],
            "isr": r,
        }
        for p, r in changes.items()
    ]
    return pa.Table.from_pylist(rows, schema=arrow_schema("cluster_metadata"))


def test_a_window_close_reads_only_the_topology_committed_since_the_last_and_finds_the_whole_historys(
    spark, tmp_path
):
    house = Lakehouse(spark, tmp_path / "lh", engine="delta-rs")
    house.create_all()
    window = timedelta(minutes=5)
    # Partition 0 moves every window (observed 1 minute into it), partition 1 once, partition 2 never.
    appends = [_topology(T - timedelta(minutes=1), {0: [1, 2], 1: [2, 3], 2: [3, 1]})]
    appends += [_topology(T + window * k + timedelta(minutes=1), {0: [1 + k % 3, 0]}) for k in range(6)]
    appends[3] = _topology(T + window * 2 + timedelta(minutes=1), {0: [3, 2], 1: [1, 3]})
    topology = TopologySlice(house, "cluster_metadata", ("topic", "partition"), "c")
    read = []
    for k, rows in enumerate(appends):
        house.append("cluster_metadata", rows, app_id="topology", batch_id=k)
        if k < 2:
            continue
        # Windows close a little after the changes of the next one were observed (the watermark's delay).
        end = T + window * (k - 1)
        keys = spark.createDataFrame(
            [("c", end - window, end)], "cluster string, window_start timestamp, window_end timestamp"
        )
        sliced = cc_loads.topology_at(topology.frame(spark), keys)
        read.append(topology.rows_read)
        topology.closed(int(end.timestamp() * 1000))
        whole = cc_loads.topology_at(house.read("cluster_metadata"), keys)
        assert _shape(sliced) == _shape(whole), end
    # The first close reads the history so far; every later one only the append since.
    assert read == [sum(t.num_rows for t in appends[:3])] + [t.num_rows for t in appends[3:]]
    assert (
        topology.held is not None and topology.held.num_rows <= 3 + 2
    )  # a row per partition + those after W
