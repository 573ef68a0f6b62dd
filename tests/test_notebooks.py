"""The notebooks: ``make notebook`` serves them on loopback, each runs in a real kernel on a lakehouse made
here with delta-rs (the tables' own schemas, a few rows chosen so every chart and table has something to
show), the committed copies carry their outputs with charts as images, and the helpers of
balancer/notebook.py do what the notebooks rely on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from notebook_runner import NOTEBOOKS, notebook_paths, run_notebooks

from balancer import notebook as nb
from balancer.config import REPO_ROOT
from balancer.spark.lakehouse import TABLES, arrow_schema
from balancer.storage import Storage

T0 = datetime(2026, 9, 21, 3, 0, tzinfo=UTC)
W1, W2, W3 = (T0 + timedelta(minutes=5 * i) for i in (1, 2, 3))
PLAN = "00000000-0000-4000-8000-000000000001"


def _window(end: datetime) -> dict:
    return {"cluster": "syn", "window_start": end - timedelta(minutes=5), "window_end": end}


def _broker_load(end: datetime, broker: int, samples: int, replicas: int, leaders: int) -> dict:
    rack = {1: "a", 2: "b", 3: "a"}[broker]
    return {
        **_window(end),
        "broker": broker,
        "rack": rack,
        "network_in": 1e6 * broker,
        "network_out": 2e6,
        "disk": 1e9,
        "replicas": replicas,
        "leaders": leaders,
        "capacity_network_in": 1e8,
        "capacity_network_out": 1e8,
        "capacity_disk": 1e12,
        "util_network_in": 0.01 * broker,
        "util_network_out": 0.02,
        "util_disk": 0.001,
        "cpu": None,
        "samples": samples,
    }


def _partition(end: datetime, partition: int, replicas: list[int], leader: int) -> dict:
    return {
        **_window(end),
        "topic": "t",
        "partition": partition,
        "leader": leader,
        "replicas": replicas,
        "replication_factor": len(replicas),
        "bytes_in": 1e5,
        "bytes_out": 2e5,
        "messages_in": 10.0,
        "size": 1e8,
        "samples": 5,
        "reporting_replicas": len(replicas),
    }


def _plan(end: datetime, status: str, plan_id: str, reason: str | None) -> dict:
    proposed = status == "proposed"
    return {
        **_window(end),
        "plan_id": plan_id,
        "created_at": end,
        "status": status,
        "reason": reason,
        "imbalance_before": 1.5,
        "imbalance_after": 1.1 if proposed else None,
        "network_in_before": 1.5,
        "network_in_after": 1.1 if proposed else None,
        "network_out_before": 1.2,
        "network_out_after": 1.05 if proposed else None,
        "disk_before": 1.0,
        "disk_after": 1.0 if proposed else None,
        "bytes_to_move": 10**8 if proposed else None,
        "leader_moves": 1 if proposed else None,
        "replica_moves": 1 if proposed else None,
        "reassignment_json": None,
        "election_json": None,
        "unmet_goals": [] if proposed else None,
        "advice": "move_replicas" if proposed else None,
    }


def _rows() -> dict[str, list[dict]]:
    """Cluster ``syn``, brokers 1-3, windows W1-W3: a plan proposed at W1, executing at W2, completed at
    W3; W2 waits on it and W3 failed the data contract (broker 3 silent in W2, broker 2 thin in W3);
    partition 0 changes leader at W2, partition 1 moves at W3; two kinds of quarantined records."""
    brokers = [
        _broker_load(W1, 1, 5, 2, 1),
        _broker_load(W1, 2, 5, 2, 1),
        _broker_load(W1, 3, 5, 1, 0),
        _broker_load(W2, 1, 5, 2, 0),
        _broker_load(W2, 2, 5, 2, 2),
        _broker_load(W3, 1, 5, 2, 0),
        _broker_load(W3, 2, 2, 1, 1),
        _broker_load(W3, 3, 5, 2, 1),
    ]
    placement = [
        _partition(W1, 0, [1, 2], 1),
        _partition(W1, 1, [2, 3], 2),
        _partition(W2, 0, [1, 2], 2),
        _partition(W2, 1, [2, 3], 2),
        _partition(W3, 0, [1, 2], 2),
        _partition(W3, 1, [3, 1], 3),
    ]
    minute = T0 + timedelta(minutes=1)
    quarantined = [
        (minute, "not JSON: Expecting value"),
        (minute + timedelta(seconds=20), "not JSON: x"),
        (minute + timedelta(minutes=1), "unsupported version: 2"),
    ]
    ranking = [
        {
            **_window(W1),
            "broker": b,
            "network_in": 1e6 * b,
            "network_out": 2e6,
            "traffic": 1e6 * b + 2e6,
            "replicas": r,
            "leaders": 1,
            "utilization": 0.01 * b,
            "rank_by_traffic": 4 - b,
            "rank_by_partitions": rp,
            "is_hot": b == 3,
        }
        for b, r, rp in ((1, 2, 1), (2, 2, 2), (3, 1, 3))
    ]
    outcomes = [
        {
            "plan_id": PLAN,
            "cluster": "syn",
            "window_end": W3,
            "resource": "network_in",
            "broker": b,
            "before": 1.5 if b == 3 else 0.75,
            "predicted": p,
            "realized": p + 0.01,
            "traffic_change": 0.02,
        }
        for b, p in ((1, 0.9), (2, 1.0), (3, 1.1), (None, 1.1))
    ]
    # Consumer group "orders": even at W1, b carries most bytes with fewer partitions at W2 (flagged, hot
    # partition); "audit" even throughout.
    consumer_groups = [
        {
            **_window(end),
            "group_id": g,
            "members": 2,
            "traffic_skew": skew,
            "flagged": skew > 1.5,
            "lag_records": lag,
            "membership_changes": changes,
            "assignor": "range",
            "group_protocol": "classic",
            "advice": ["hot_partition"] if skew > 1.5 else [],
        }
        for end, g, skew, lag, changes in (
            (W1, "orders", 1.0, 10, 1),
            (W2, "orders", 1.8, 900, 0),
            (W1, "audit", 1.0, 0, 0),
            (W2, "audit", 1.0, 0, 0),
        )
    ]
    consumer_ranking = [
        {
            **_window(end),
            "group_id": "orders",
            "member_id": f"m-{c}",
            "client_id": c,
            "partitions": n,
            "bytes_per_sec": b,
            "rank_by_traffic": rt,
            "rank_by_partitions": rp,
            "rank_by_lag": rt,
            "lag_records": 0,
        }
        for end, c, n, b, rt, rp in (
            (W1, "a", 2, 500.0, 1, 1),
            (W1, "b", 2, 500.0, 2, 2),
            (W2, "a", 3, 100.0, 2, 1),
            (W2, "b", 1, 900.0, 1, 2),
        )
    ]
    consumer_advice = [
        {
            **_window(W2),
            "group_id": "orders",
            "kind": "hot_partition",
            "client_id": "b",
            "topic": "t",
            "partition": 3,
            "figure": 1.8,
            "detail": "t-3 carries 900 B/s",
        }
    ]
    return {
        "consumer_groups": consumer_groups,
        "consumer_ranking": consumer_ranking,
        "consumer_advice": consumer_advice,
        "broker_load": brokers,
        "partition_load": placement,
        "broker_ranking": ranking,
        "balance_plans": [
            _plan(W1, "proposed", PLAN, None),
            _plan(W2, "waiting", "00000000-0000-4000-8000-000000000002", f"plan {PLAN} is executing"),
            _plan(W3, "skipped", "00000000-0000-4000-8000-000000000003", "broker 2: reported in too few"),
        ],
        "plan_actions": [
            {
                "plan_id": PLAN,
                "cluster": "syn",
                "seq": 0,
                "action": "leadership",
                "topic": "t",
                "partition": 0,
                "old_replicas": [1, 2],
                "new_replicas": [2, 1],
                "old_leader": 1,
                "new_leader": 2,
                "bytes_to_move": 0,
            },
            {
                "plan_id": PLAN,
                "cluster": "syn",
                "seq": 1,
                "action": "replica",
                "topic": "t",
                "partition": 1,
                "old_replicas": [2, 3],
                "new_replicas": [3, 1],
                "old_leader": 2,
                "new_leader": 3,
                "bytes_to_move": 10**8,
            },
        ],
        "plan_events": [
            {
                "plan_id": PLAN,
                "cluster": "syn",
                "window_end": end,
                "status": status,
                "actions_done": done,
                "actions_total": 2,
                "bytes_done": done * 5 * 10**7,
                "detail": f"{done} of 2 actions",
                "recorded_at": end + timedelta(seconds=5),
            }
            for end, status, done in ((W2, "executing", 1), (W3, "completed", 2))
        ],
        "plan_batches": [
            {
                "plan_id": PLAN,
                "cluster": "syn",
                "batch": i,
                "kind": kind,
                "actions": 1,
                "bytes_to_move": size,
                "throttle": json.dumps({"3": 5e7}) if size else None,
                "estimated_seconds": 2.0 * i,
                "meets_deadline": True,
                "note": None,
                "reassignment_json": None,
                "election_json": None,
            }
            for i, kind, size in ((0, "leadership", 0), (1, "replica", 10**8))
        ],
        "plan_outcomes": outcomes,
        # Batch 1 stalled once (a broker left), then a second run completed it in 3 s against 2 s estimated.
        "plan_executions": [
            {
                "plan_id": PLAN,
                "cluster": "syn",
                "run_id": run,
                "batch": batch,
                "kind": kind,
                "outcome": outcome,
                "recorded_at": W1 + timedelta(seconds=at),
                "started_at": W1 + timedelta(seconds=started),
                "ended_at": None if outcome == "started" else W1 + timedelta(seconds=at),
                "actions": 1,
                "bytes_to_move": size,
                "throttle": json.dumps({"3": 5e7}) if size else None,
                "throttled_topics": ["t"] if size else [],
                "estimated_seconds": 2.0 * batch,
                "measured_seconds": measured,
                "duration_ratio": measured / (2.0 * batch) if measured and batch else None,
                "detail": None,
            }
            for run, batch, kind, size, outcome, started, at, measured in (
                ("r1", 0, "leadership", 0, "started", 0, 0, None),
                ("r1", 0, "leadership", 0, "completed", 0, 0.2, 0.2),
                ("r1", 1, "replica", 10**8, "started", 1, 1, None),
                ("r1", 1, "replica", 10**8, "stalled", 1, 9, None),
                ("r2", 1, "replica", 10**8, "started", 20, 20, None),
                ("r2", 1, "replica", 10**8, "completed", 20, 23, 3.0),
            )
        ],
        "telemetry_quarantine": [
            {
                "kafka_topic": "m",
                "kafka_partition": 0,
                "kafka_offset": i,
                "kafka_timestamp": at,
                "key": None,
                "value": b"x",
                "value_text": "x",
                "reason": reason,
                "batch_id": 1,
                "quarantined_at": at,
            }
            for i, (at, reason) in enumerate(quarantined)
        ],
        "quality_runs": [
            {
                "run_id": f"r{i}",
                "query": query,
                "batch_id": i,
                "cluster": "syn",
                "window_start": W3 - timedelta(minutes=5),
                "window_end": W3,
                "suite": suite,
                "success": ok,
                "evaluated": 4,
                "failed_expectations": None
                if ok
                else "broker 2: reported in too few of the window's intervals",
                "details_json": "{}",
                "validation_ms": 10,
                "checked_at": W3,
            }
            for i, (query, suite, ok) in enumerate(
                (("ingest", "telemetry_v1", True), ("balance", "windows_v1", False))
            )
        ],
        "cluster_metadata": [
            {
                "cluster": "syn",
                "observed_at": T0,
                "topic": "t",
                "partition": 0,
                "replicas": [1, 2],
                "leader": 1,
                "isr": [1, 2],
            },
            {
                "cluster": "syn",
                "observed_at": T0,
                "topic": "t",
                "partition": 1,
                "replicas": [2, 3],
                "leader": 2,
                "isr": [2, 3],
            },
            {
                "cluster": "syn",
                "observed_at": W2,
                "topic": "u",
                "partition": 0,
                "replicas": [],
                "leader": None,
                "isr": [],
            },
        ],
        "broker_metadata": [
            {
                "cluster": "syn",
                "observed_at": T0,
                "broker": b,
                "rack": {1: "a", 2: "b", 3: "a"}[b],
                "present": True,
            }
            for b in (1, 2, 3)
        ],
    }


@pytest.fixture(scope="module")
def lakehouse(tmp_path_factory) -> Path:
    """Every table of the job (its own schema), written with delta-rs; the ones not listed stay empty."""
    root = tmp_path_factory.mktemp("notebooks") / "lakehouse"
    rows = _rows()
    for table in TABLES:
        schema = arrow_schema(table)
        DeltaTable.create(str(root / table), schema=schema, name=table)
        if rows.get(table):
            write_deltalake(
                str(root / table), pa.Table.from_pylist(rows[table], schema=schema), mode="append"
            )
    return root


# What each notebook must compute from that lakehouse: expressions evaluated in its kernel, and their values.
EXPECTED = {
    "balance_history.ipynb": {
        "len(plans)": 3,
        "sorted(imbalance.figure.unique())": [
            "network_in_after",
            "network_in_before",
            "network_out_after",
            "network_out_before",
        ],
        "moved.set_index('action').actions.to_dict()": {"leadership": 1, "replica": 1},
        "left[['status', 'advice']].values.tolist()": [["proposed", "move_replicas"]],
    },
    "plan_lifecycle.ipynb": {
        "status.set_index('plan_id').status.to_dict()": {PLAN: "completed"},
        "lifecycle.progress.tolist()": [0.5, 1.0],
        "sorted(r['broker'] for d in predicted_vs_realized_chart.to_dict()['datasets'].values() "
        "for r in d if 'realized' in r)": [1.0, 2.0, 3.0],
        "batches.kind.tolist()": ["leadership", "replica"],
        "attempts[['batch', 'outcome']].values.tolist()": [[0, ["completed"]], [1, ["stalled", "completed"]]],
        "[[r['estimated_seconds'], r['measured_seconds']] for d in duration_chart.to_dict()['datasets']"
        ".values() for r in d if 'measured_seconds' in r]": [[2.0, 3.0]],
        "durations.duration_ratio.tolist()": [1.5],
    },
    "data_quality.ipynb": {
        "reasons.groupby('reason_kind').records.sum().to_dict()": {"not JSON": 2, "unsupported version": 1},
        "len(reasons)": 2,
        "coverage[coverage.coverage < 1][['window', 'broker', 'coverage']].values.tolist()": [
            ["09-21 03:10", 3, 0.0],
            ["09-21 03:15", 2, 0.4],
        ],
        "failures.failed_expectations.tolist()": ["broker 2: reported in too few of the window's intervals"],
        "not_planned.status.tolist()": ["waiting", "skipped"],
        "'imbalance_chart' in dir()": False,  # balance_history's, run before it in the same kernel
    },
    "consumer_balance.ipynb": {
        "summary.reset_index().set_index('group_id').flagged.to_dict()": {"audit": 0, "orders": 1},
        "latest[['client_id', 'rank_by_traffic', 'rank_by_partitions']].values.tolist()": [
            ["a", 2, 1],
            ["b", 1, 2],
        ],
        "shares[['member', 'measure', 'share']].round(2).values.tolist()": [
            ["a m-a", "partitions", 0.75],
            ["a m-a", "traffic", 0.1],
            ["b m-b", "partitions", 0.25],
            ["b m-b", "traffic", 0.9],
        ],
        "advised.kind.tolist()": ["hot_partition"],
    },
    "topology_history.ipynb": {
        "changes[['moved', 'new_leader']].values.tolist()": [[0, 1], [1, 0]],
        "sorted(held.groupby('held')['count'].sum().items())": [["leaders", 6], ["replicas", 14]],
        "recorded[['partitions', 'deleted']].values.tolist()": [[2, 0], [1, 1]],
        "len(broker_changes)": 3,
    },
}


@pytest.fixture(scope="module")
def answers(lakehouse) -> dict[str, dict]:
    """Every notebook in notebooks/, run in one kernel on that lakehouse, with what EXPECTED asks of it."""
    paths = notebook_paths()
    assert {p.name for p in paths} == set(EXPECTED), "say in EXPECTED what each notebook must compute"
    return run_notebooks({p: {expr: expr for expr in EXPECTED[p.name]} for p in paths}, lakehouse)


@pytest.mark.integration  # starts a Jupyter kernel
@pytest.mark.no_spark  # the notebooks read the tables with delta-rs
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_notebook_runs_in_a_kernel_and_computes_its_answers(name, answers):
    assert answers[name] == json.loads(json.dumps(EXPECTED[name]))


@pytest.mark.integration  # starts a Jupyter kernel
@pytest.mark.no_spark
def test_a_failing_cell_fails_the_run_naming_the_notebook(tmp_path, lakehouse):
    broken = tmp_path / "broken.ipynb"
    cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("x / 0")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), broken)
    with pytest.raises(AssertionError, match=r"broken.ipynb: a cell failed[\s\S]*ZeroDivisionError"):
        run_notebooks({broken: {}}, lakehouse)


def test_notebooks_are_committed_with_their_outputs_and_charts_as_images():
    paths = notebook_paths()
    assert {p.name for p in paths} == set(EXPECTED)
    for path in paths:
        assert path.stat().st_size < 300_000, f"{path.name}: keep saved outputs small"
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        first = book.cells[0]
        assert first.cell_type == "markdown" and first.source.startswith("# ") and "?" in first.source, path
        assert book.metadata.kernelspec.name == "python3"
        code = [c for c in book.cells if c.cell_type == "code"]
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), (
            f"{path.name}: not run in order"
        )
        assert all("error" not in {o.output_type for o in cell.outputs} for cell in code), path.name
        # A cell ending in a chart's name displays that chart: as a PNG image.
        charts = [c for c in code if c.source.strip().splitlines()[-1].endswith("_chart")]
        assert charts, f"{path.name} shows no chart"
        for cell in charts:
            images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
            assert len(images) == 1, (path.name, cell.source)


def test_lakehouse_comes_from_the_config_file_and_the_override(tmp_path):
    assert nb.lakehouse({}).root == str(REPO_ROOT / "data" / "lakehouse")  # conf/local.yaml, as make run
    config = tmp_path / "job.yaml"
    config.write_text(
        "lakehouse:\n  path: s3://bucket/lh\n  storage_options: {endpoint: 'http://127.0.0.1:1'}\n"
    )
    on_s3 = nb.lakehouse({nb.ENV_CONFIG: str(config)})
    assert on_s3.root == "s3://bucket/lh"
    assert on_s3.delta_options()["endpoint"] == "http://127.0.0.1:1"
    moved = nb.lakehouse({nb.ENV_CONFIG: str(config), nb.ENV_LAKEHOUSE: "s3://other/x"})
    assert moved.root == "s3://other/x" and moved.options == on_s3.options
    assert nb.lakehouse({nb.ENV_LAKEHOUSE: "elsewhere/lh"}).root == str(REPO_ROOT / "elsewhere" / "lh")


def test_read_table_names_the_fix_when_there_is_no_lakehouse(tmp_path, lakehouse):
    with pytest.raises(nb.MissingLakehouseError, match=r"'balance_plans'.*make run"):
        nb.read_table(Storage.of(tmp_path), "balance_plans")
    plans = nb.read_table(Storage.of(lakehouse), "balance_plans", ["plan_id", "window_end"])
    assert list(plans.columns) == ["plan_id", "window_end"] and len(plans) == 3
    assert str(plans.window_end.dt.tz) == "UTC"


def test_cli_says_where_the_lakehouse_is_or_how_to_make_one(tmp_path, lakehouse):
    python = str(Path(os.sys.executable))
    ok = subprocess.run(
        [python, "-m", "balancer.notebook"],
        env={**os.environ, nb.ENV_LAKEHOUSE: str(lakehouse)},
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and str(lakehouse) in ok.stdout
    missing = subprocess.run(
        [python, "-m", "balancer.notebook"],
        env={**os.environ, nb.ENV_LAKEHOUSE: str(tmp_path / "none")},
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "make run" in missing.stderr


@pytest.mark.parametrize("broken", ["log", "data"])
def test_cli_names_an_unreadable_table_in_one_line(tmp_path, lakehouse, broken):
    # A balance_plans table whose newest log entry, or whose every data file, is random bytes.
    copy = tmp_path / "lakehouse"
    shutil.copytree(lakehouse, copy)
    table = copy / "balance_plans"
    victims = (
        sorted((table / "_delta_log").glob("*.json"))[-1:] if broken == "log" else table.glob("*.parquet")
    )
    for victim in list(victims):
        victim.write_bytes(os.urandom(64))
    got = subprocess.run(
        [str(Path(os.sys.executable)), "-m", "balancer.notebook"],
        env={**os.environ, nb.ENV_LAKEHOUSE: str(copy)},
        capture_output=True,
        text=True,
    )
    assert got.returncode == 1 and got.stdout == ""
    assert got.stderr.startswith(f"error: cannot read 'balance_plans' under {copy}: ")
    assert got.stderr.count("\n") == 1


def test_static_charts_display_png_images():
    import altair as alt
    from IPython.core.formatters import DisplayFormatter

    nb.static_charts()
    chart = alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_line().encode(x="x:Q", y="y:Q")
    data, _ = DisplayFormatter().format(chart)
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert not any("vegalite" in kind for kind in data)


def test_quarantine_over_time_counts_reason_kinds_per_minute():
    at = pd.to_datetime(["2026-01-01T00:00:10Z", "2026-01-01T00:00:50Z", "2026-01-01T00:01:05Z"])
    frame = pd.DataFrame({"quarantined_at": at, "reason": ["bad: a", "bad: b", "worse"]})
    counts = nb.quarantine_over_time(frame)
    assert counts.values.tolist() == [
        [pd.Timestamp("2026-01-01T00:00Z"), "bad", 2],
        [pd.Timestamp("2026-01-01T00:01Z"), "worse", 1],
    ]
    assert nb.quarantine_over_time(frame.iloc[:0]).empty


def test_broker_coverage_counts_a_silent_broker_as_zero():
    loads = pd.DataFrame({"cluster": "c", "window_end": [1, 1, 2], "broker": [1, 2, 1], "samples": [4, 2, 5]})
    coverage = nb.broker_coverage(loads)
    assert coverage[["window_end", "broker", "samples", "coverage"]].values.tolist() == [
        [1, 1, 4, 1.0],
        [1, 2, 2, 0.5],
        [2, 1, 5, 1.0],
        [2, 2, 0, 0.0],
    ]


def test_placement_changes_tell_moves_from_leader_changes():
    frame = pd.DataFrame(
        {
            "cluster": "c",
            "window_end": [1, 1, 2, 2, 3, 3],
            "topic": "t",
            "partition": [0, 1, 0, 1, 0, 1],
            "leader": [1, 2, 2, 2, 2, 3],
            "replicas": [[1, 2], [2, 3], [1, 2], [2, 3], [2, 1], [3, 1]],
        }
    )
    changes = nb.placement_changes(frame)
    assert changes[["window_end", "moved", "new_leader"]].values.tolist() == [[2, 0, 1], [3, 2, 0]]


def test_latest_plan_status_is_the_newest_event_else_proposed():
    plans = pd.DataFrame(
        {
            "cluster": "c",
            "plan_id": ["a", "b", "w"],
            "window_end": [1, 2, 3],
            "status": ["proposed", "proposed", "waiting"],
        }
    )
    events = pd.DataFrame(
        {
            "plan_id": ["a", "a"],
            "window_end": [2, 3],
            "recorded_at": [0, 0],
            "status": ["executing", "completed"],
            "actions_done": [1, 2],
            "actions_total": [2, 2],
            "detail": ["", ""],
        }
    )
    status = nb.latest_plan_status(plans, events)
    assert status[["plan_id", "status"]].values.tolist() == [["b", "proposed"], ["a", "completed"]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp* has them) listening on ``port``."""
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(name).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.add(address)
    return found


@pytest.mark.integration  # starts a Jupyter kernel or server
def test_make_notebook_serves_jupyterlab_on_loopback_only(tmp_path):
    port = _free_port()
    out = tmp_path / "make-notebook.log"
    with open(out, "wb") as log:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "notebook", f"NOTEBOOK_PORT={port}"],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")},
        )
    try:
        url = status = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and status is None:
            assert proc.poll() is None, out.read_text()
            lines = [line for line in out.read_text().splitlines() if line.startswith("JupyterLab: http")]
            url = lines[0].split()[1] if lines else None
            if url:
                try:
                    with urllib.request.urlopen(url.replace("/lab?", "/api/status?"), timeout=5) as response:
                        status = json.load(response)
                except (urllib.error.URLError, ConnectionError):
                    pass
            time.sleep(0.5)
        assert status is not None, out.read_text()
        assert url.startswith(f"http://127.0.0.1:{port}/lab?token=")
        assert "started" in status and status["kernels"] == 0
        with pytest.raises(urllib.error.HTTPError) as refused:  # the token is required
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5)
        assert refused.value.code == 403
        contents = url.replace("/lab?", "/api/contents?")
        with urllib.request.urlopen(contents, timeout=5) as response:
            listed = {item["name"] for item in json.load(response)["content"]}
        assert listed >= {p.name for p in NOTEBOOKS.glob("*.ipynb")}
        assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert not _listening_addresses(port)
