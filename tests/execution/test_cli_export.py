from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from balancer.cli.main import main
from balancer.execution import BrokerLoad, batch_rows, plan_schedule, split_batches
from balancer.planner import Action

MB = 10**6
WINDOW = datetime(2026, 11, 24, 22, 0, tzinfo=UTC)
ACTIONS = [
    Action("leadership", "orders", 0, (1, 2), (2, 1), 1, 2, 0),
    Action("replica_move", "orders", 1, (1, 2), (1, 3), 1, 1, 50 * MB),
    Action("replica_move", "orders", 2, (2, 3), (2, 1), 2, 2, 20 * MB),
]
LOADS = {b: BrokerLoad(1 * MB, 1 * MB, 100 * MB, 100 * MB) for b in (1, 2, 3)}
TRAFFIC = {("orders", p): 0.1 * MB for p in range(3)}
BATCHES_SCHEMA = pa.schema(
    [
        ("plan_id", pa.string()),
        ("cluster", pa.string()),
        ("batch", pa.int32()),
        ("kind", pa.string()),
        ("actions", pa.int32()),
        ("bytes_to_move", pa.int64()),
        ("throttle", pa.map_(pa.int32(), pa.int64())),
        ("estimated_seconds", pa.float64()),
        ("reassignment_json", pa.string()),
        ("election_json", pa.string()),
    ]
)


def cli(tmp_path, *args):
    return main(["export", *args, "--set", f"lakehouse.path={tmp_path / 'lh'}"])


# lakehouse/tables/plan_batches.sql: throttle as a JSON object {broker: bytes/s}, with meets_deadline and
# note.
DDL_SCHEMA = pa.schema(
    [
        ("plan_id", pa.string()),
        ("cluster", pa.string()),
        ("batch", pa.int32()),
        ("kind", pa.string()),
        ("actions", pa.int32()),
        ("bytes_to_move", pa.int64()),
        ("throttle", pa.string()),
        ("estimated_seconds", pa.float64()),
        ("meets_deadline", pa.bool_()),
        ("note", pa.string()),
        ("reassignment_json", pa.string()),
        ("election_json", pa.string()),
    ]
)


@pytest.mark.parametrize("throttle_as", ["json", "map"])
def test_export_reads_plan_batches(tmp_path, capsys, throttle_as):
    batches = split_batches(ACTIONS)
    schedule = plan_schedule(
        batches, deadline_seconds=600, broker_load=LOADS, capacity_threshold=0.8, partition_traffic=TRAFFIC
    )
    rows = batch_rows(batches, schedule.throttles, plan_id="p-1", cluster="c")
    other = batch_rows(batches, schedule.throttles, plan_id="p-2", cluster="c")
    if throttle_as == "map":
        table = pa.Table.from_pylist(
            [dict(r, throttle=list((r["throttle"] or {}).items())) for r in rows + other],
            schema=BATCHES_SCHEMA,
        )
    else:
        table = pa.Table.from_pylist(
            [
                dict(
                    r,
                    throttle=json.dumps({str(b): v for b, v in r["throttle"].items()})
                    if r["throttle"]
                    else None,
                    meets_deadline=True,
                    note=None,
                )
                for r in rows + other
            ],
            schema=DDL_SCHEMA,
        )
    write_deltalake(str(tmp_path / "lh" / "plan_batches"), table)
    assert cli(tmp_path, "p-1", "--out", str(tmp_path / "out")) == 0
    assert "2 batch(es)" in capsys.readouterr().out
    reassignment = json.loads((tmp_path / "out" / "batch-001-reassignment.json").read_text())
    assert [p["partition"] for p in reassignment["partitions"]] == [1, 2]
    assert "p-1" in (tmp_path / "out" / "README.txt").read_text()
    # A second export into the same folder needs --force; an unknown plan is an error naming it.
    assert cli(tmp_path, "p-1", "--out", str(tmp_path / "out")) == 2
    assert "not empty" in capsys.readouterr().err
    assert cli(tmp_path, "p-1", "--out", str(tmp_path / "out"), "--force") == 0
    assert cli(tmp_path, "nope", "--out", str(tmp_path / "out2")) == 2
    assert "plan nope" in capsys.readouterr().err


def test_export_falls_back_to_plan_actions_with_throttles_from_the_plans_window(tmp_path, capsys):
    lh = tmp_path / "lh"
    ts = pa.timestamp("us", tz="UTC")
    write_deltalake(
        str(lh / "plan_actions"),
        pa.Table.from_pylist(
            [{"plan_id": "p-1", "cluster": "c", **a.row(seq)} for seq, a in enumerate(ACTIONS)][::-1]
        ),
    )
    write_deltalake(
        str(lh / "balance_plans"),
        pa.Table.from_pylist(
            [{"plan_id": "p-1", "cluster": "c", "window_end": WINDOW}],
            schema=pa.schema([("plan_id", pa.string()), ("cluster", pa.string()), ("window_end", ts)]),
        ),
    )
    earlier = WINDOW.replace(hour=21)
    write_deltalake(
        str(lh / "broker_load"),
        pa.Table.from_pylist(
            [
                {
                    "cluster": "c",
                    "window_end": w,
                    "broker": b,
                    "network_in": 1.0 * MB,
                    "network_out": 1.0 * MB,
                    "capacity_network_in": 100.0 * MB,
                    "capacity_network_out": 100.0 * MB,
                }
                for b in (1, 2, 3)
                for w in (WINDOW, earlier)
            ],
            schema=pa.schema(
                [
                    ("cluster", pa.string()),
                    ("window_end", ts),
                    ("broker", pa.int32()),
                    ("network_in", pa.float64()),
                    ("network_out", pa.float64()),
                    ("capacity_network_in", pa.float64()),
                    ("capacity_network_out", pa.float64()),
                ]
            ),
        ),
    )
    write_deltalake(
        str(lh / "partition_load"),
        pa.Table.from_pylist(
            [
                {
                    "cluster": "c",
                    "window_end": WINDOW,
                    "topic": "orders",
                    "partition": p,
                    "bytes_in": 0.1 * MB,
                }
                for p in range(3)
            ],
            schema=pa.schema(
                [
                    ("cluster", pa.string()),
                    ("window_end", ts),
                    ("topic", pa.string()),
                    ("partition", pa.int32()),
                    ("bytes_in", pa.float64()),
                ]
            ),
        ),
    )
    assert cli(tmp_path, "p-1", "--out", str(tmp_path / "out"), "--set", "executor.deadline=10 minutes") == 0
    script = (tmp_path / "out" / "run.sh").read_text()
    # Same as planning it with the same loads and deadline.
    batches = split_batches(ACTIONS)
    expected = (
        plan_schedule(
            batches,
            deadline_seconds=600,
            broker_load=LOADS,
            capacity_threshold=0.8,
            partition_traffic=TRAFFIC,
        )
        .throttles[1]
        .rate_by_broker
    )
    for broker, rate in expected.items():
        assert f"broker_throttle {broker} {int(rate)}" in script
    assert (tmp_path / "out" / "batch-000-election.json").exists()
