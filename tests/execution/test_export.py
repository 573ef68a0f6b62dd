from __future__ import annotations

import json
import os
import subprocess

import pyarrow as pa
import pytest

from balancer.execution import BrokerLoad, plan_schedule, split_batches
from balancer.execution.export import ExportError, batch_election, batch_reassignment, batch_rows, export_plan
from balancer.planner import Action

from .test_cli_export import BATCHES_SCHEMA  # plan_batches as Arrow, throttles as a map

MB = 10**6
ROOMY = BrokerLoad(network_in=0, network_out=0, capacity_network_in=100 * MB, capacity_network_out=100 * MB)


# ---- the tools' documented formats (Kafka's operations docs, kafka-reassign-partitions.sh and
# kafka-leader-election.sh --help), checked independently of the exporter's own checks -------------


def assert_reassignment_format(doc):
    assert set(doc) == {"version", "partitions"} and doc["version"] == 1
    assert isinstance(doc["partitions"], list) and doc["partitions"]
    for p in doc["partitions"]:
        assert set(p) <= {"topic", "partition", "replicas", "log_dirs"} and {
            "topic",
            "partition",
            "replicas",
        } <= set(p)
        assert isinstance(p["topic"], str) and p["topic"]
        assert type(p["partition"]) is int and p["partition"] >= 0
        assert p["replicas"] and all(type(b) is int for b in p["replicas"])
        assert len(set(p["replicas"])) == len(p["replicas"])
        if "log_dirs" in p:
            assert len(p["log_dirs"]) == len(p["replicas"]) and all(isinstance(d, str) for d in p["log_dirs"])


def assert_election_format(doc):
    assert set(doc) == {"partitions"} and doc["partitions"]
    for p in doc["partitions"]:
        assert set(p) == {"topic", "partition"}
        assert isinstance(p["topic"], str) and type(p["partition"]) is int and p["partition"] >= 0


def action(kind, partition, old, new, leader, size=10 * MB, topic="orders"):
    new = (leader,) + tuple(b for b in new if b != leader)
    moved = len(set(new) - set(old))
    return Action(
        kind=kind,
        topic=topic,
        partition=partition,
        old_replicas=tuple(old),
        new_replicas=new,
        old_leader=old[0],
        new_leader=leader,
        bytes_to_move=size * moved if kind != "leadership" else 0,
    )


def plan_rows(**limits):
    actions = [
        action("leadership", 0, (1, 2, 3), (1, 2, 3), 2),  # 2 not first: reorder, then election
        action("leadership", 1, (3, 1, 2), (3, 1, 2), 1),  # same
        # 2 leads since broker 1 restarted; 1, first, is preferred already: election only.
        Action(
            "leadership",
            "orders",
            2,
            old_replicas=(1, 2, 3),
            new_replicas=(1, 2, 3),
            old_leader=2,
            new_leader=1,
            bytes_to_move=0,
        ),
        action("replica_move", 3, (1, 2, 3), (1, 2, 4), 1),  # leader stays: no election
        action("replica_move", 4, (1, 2, 3), (4, 2, 3), 4),  # old leader leaves: controller elects
        action("replica_move", 5, (2, 3, 1), (2, 3, 5), 3),  # leader 2 stays in the set, 3 planned: election
        action("swap", 6, (4, 5, 6), (4, 5, 1), 4),
    ]
    batches = split_batches(actions, **limits)
    loads = {b: ROOMY for b in range(1, 7)}
    schedule = plan_schedule(
        batches,
        deadline_seconds=600,
        broker_load=loads,
        capacity_threshold=0.8,
        partition_traffic={("orders", p): 1000.0 for p in range(7)},
    )
    return batches, batch_rows(batches, schedule.throttles, plan_id="p-1", cluster="prod-eu-1")


def test_batch_json_follows_the_planner_and_kafkas_rules():
    batches, rows = plan_rows()
    lead, moves = batches
    # Leadership: reorder where the intended leader is not first, elect every leader change.
    reorder = batch_reassignment(lead)
    assert [(p["partition"], p["replicas"]) for p in reorder["partitions"]] == [
        (0, [2, 1, 3]),
        (1, [1, 3, 2]),
    ]
    assert [p["partition"] for p in batch_election(lead)["partitions"]] == [0, 1, 2]
    # Replica moves: every partition; election only where the old leader stays but is not the planned one.
    assert [p["partition"] for p in batch_reassignment(moves)["partitions"]] == [3, 4, 5, 6]
    assert batch_election(moves) == {"partitions": [{"topic": "orders", "partition": 5}]}
    for doc in (reorder, batch_reassignment(moves)):
        assert_reassignment_format(doc)
    assert [r["kind"] for r in rows] == ["leadership", "replica_move"]
    assert rows[1]["throttle"] and all(isinstance(v, int) and v > 0 for v in rows[1]["throttle"].values())
    assert rows[0]["throttle"] == {} and rows[1]["actions"] == 4


def test_preferred_leader_already_first_needs_no_reorder():
    restart = Action(
        "leadership",
        "t",
        0,
        old_replicas=(1, 2),
        new_replicas=(1, 2),
        old_leader=2,
        new_leader=1,
        bytes_to_move=0,
    )
    (batch,) = split_batches([restart])
    assert batch_reassignment(batch) is None
    assert batch_election(batch) == {"partitions": [{"topic": "t", "partition": 0}]}


def test_export_writes_kafka_files_a_script_and_a_readme(tmp_path):
    _, rows = plan_rows()
    written = export_plan(rows[::-1], tmp_path / "out")  # any order in, batch order out
    names = [p.name for p in written]
    assert names == [
        "batch-000-reassignment.json",
        "batch-000-election.json",
        "batch-001-reassignment.json",
        "batch-001-election.json",
        "run.sh",
        "README.txt",
    ]
    for p in written:
        if p.name.endswith("reassignment.json"):
            assert_reassignment_format(json.loads(p.read_text()))
        elif p.name.endswith("election.json"):
            assert_election_format(json.loads(p.read_text()))
    run = tmp_path / "out" / "run.sh"
    assert os.access(run, os.X_OK)
    subprocess.run(["bash", "-n", str(run)], check=True)
    script = run.read_text()
    assert script.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in script
    throttle = rows[1]["throttle"]
    assert f"--throttle {min(throttle.values())}" in script
    for broker, rate in throttle.items():
        assert f"broker_throttle {broker} {rate}" in script
    readme = (tmp_path / "out" / "README.txt").read_text()
    assert "p-1" in readme and "${BOOTSTRAP_SERVERS}" in readme and "kafka-leader-election.sh" in readme


FAKE_TOOL = """#!/usr/bin/env bash
# Logs each call; --verify says "in progress" the first time per file, then completed. With
# FAKE_VERIFY set, --verify prints its lines instead ("|" between lines) for the first FAKE_VERIFY_CALLS
# calls (default: every call), then completed.
echo "$(basename "$0") $*" >> "$FAKE_LOG"
case " $* " in
  *" --verify "*)
    file="${@: -1}"; mark="$FAKE_DIR/verified-$(basename "$file")"
    calls=$(grep -c -- "--verify" "$FAKE_LOG")
    if [ -n "${FAKE_VERIFY:-}" ] && [ "$calls" -le "${FAKE_VERIFY_CALLS:-$calls}" ]; then
      tr '|' '\\n' <<<"$FAKE_VERIFY"
    elif [ -n "${FAKE_VERIFY:-}" ]; then echo "Reassignment of partition orders-3 is completed."
    elif [ ! -e "$mark" ]; then touch "$mark"; echo "Reassignment of partition orders-3 is still in progress."
    else echo "Reassignment of partition orders-3 is completed."; fi ;;
esac
if [ -n "${FAIL_ON:-}" ] && grep -q -- "$FAIL_ON" <<<"$*"; then echo "boom" >&2; exit 1; fi
exit 0
"""


def fake_kafka(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("kafka-reassign-partitions.sh", "kafka-leader-election.sh", "kafka-configs.sh"):
        (bin_dir / tool).write_text(FAKE_TOOL)
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def run_script(tmp_path, out, *args, **env):
    log = tmp_path / "calls.log"
    full = {
        **os.environ,
        "KAFKA_BIN": str(fake_kafka(tmp_path)),
        "FAKE_LOG": str(log),
        "FAKE_DIR": str(tmp_path),
        "VERIFY_INTERVAL": "0",
        **env,
    }
    if "BOOTSTRAP_SERVERS" not in env:
        full.pop("BOOTSTRAP_SERVERS", None)
    done = subprocess.run(
        ["bash", str(out / "run.sh"), *args], env=full, capture_output=True, text=True, timeout=60
    )
    return done, (log.read_text().splitlines() if log.exists() else [])


def test_run_sh_runs_the_batches_in_order_against_kafkas_tools(tmp_path):
    _, rows = plan_rows()
    out = tmp_path / "out"
    export_plan(rows, out)
    done, calls = run_script(tmp_path, out, "kafka-1:9092")
    assert done.returncode == 0, done.stderr
    tools = [
        c.split()[0]
        + " "
        + next(w for w in c.split()[1:] if w in ("--execute", "--verify", "--alter", "--election-type"))
        for c in calls
    ]
    throttle = rows[1]["throttle"]
    assert tools == (
        ["kafka-reassign-partitions.sh --execute"]
        + ["kafka-reassign-partitions.sh --verify"] * 2
        + ["kafka-leader-election.sh --election-type"]
        + ["kafka-reassign-partitions.sh --execute"]
        + ["kafka-configs.sh --alter"] * len(throttle)
        + ["kafka-reassign-partitions.sh --verify"] * 2
        + ["kafka-leader-election.sh --election-type"]
    )
    assert all("--bootstrap-server kafka-1:9092" in c for c in calls)
    assert "--throttle" not in calls[0] and f"--throttle {min(throttle.values())}" in calls[4]
    assert (out / "batch-001-execute.log").exists()
    assert "all batches done" in done.stdout


def test_run_sh_stops_on_the_first_failure_and_needs_bootstrap_servers(tmp_path):
    _, rows = plan_rows()
    out = tmp_path / "out"
    export_plan(rows, out)
    done, calls = run_script(tmp_path, out, "kafka-1:9092", FAIL_ON="batch-000-election.json")
    assert done.returncode != 0 and "all batches done" not in done.stdout
    assert calls[-1].startswith("kafka-leader-election.sh") and not any("batch-001" in c for c in calls)
    (tmp_path / "calls.log").unlink()
    done, calls = run_script(tmp_path, out)
    assert done.returncode == 2 and "BOOTSTRAP_SERVERS" in done.stderr and calls == []
    done, calls = run_script(tmp_path, out, BOOTSTRAP_SERVERS="from-env:9092", START_BATCH="1")
    assert done.returncode == 0, done.stderr
    assert calls and all("from-env:9092" in c and "batch-000" not in c for c in calls)


# Kafka's --verify lines (ReassignPartitionsCommand.partitionReassignmentStatesToString).
DONE = "Reassignment of partition orders-4 is completed."
LEAVING = (
    "There is no active reassignment of partition orders-3, but replica set is 1,2,4,3 rather than 1,2,4."
)
REORDERED = (
    "There is no active reassignment of partition orders-0, but replica set is 1,2,3 rather than 2,1,3."
)
TAKEN = "There is no active reassignment of partition orders-3, but replica set is 1,2,5 rather than 1,2,4."


def verifies(calls):
    return [c for c in calls if "--verify" in c]


def test_run_sh_waits_while_a_moved_partition_still_lists_the_replica_it_is_leaving(tmp_path):
    # Kafka has finished the move but the answering broker still lists the old replica (or the
    # old order): every planned replica is there, so the script polls again instead of stopping.
    _, rows = plan_rows()
    out = tmp_path / "out"
    export_plan(rows, out)
    done, calls = run_script(
        tmp_path, out, "kafka-1:9092", FAKE_VERIFY="|".join([DONE, LEAVING, REORDERED]), FAKE_VERIFY_CALLS="3"
    )
    assert done.returncode == 0, done.stderr
    assert len(verifies(calls)) == 5  # batch 0: 3 settling + 1 done; batch 1: 1 done
    assert "waiting for the old replicas to leave" in done.stdout and "all batches done" in done.stdout


def test_run_sh_stops_when_a_planned_replica_is_missing_or_the_old_one_never_leaves(tmp_path):
    _, rows = plan_rows()
    out = tmp_path / "out"
    export_plan(rows, out)
    done, calls = run_script(tmp_path, out, "kafka-1:9092", FAKE_VERIFY="|".join([LEAVING, TAKEN]))
    assert done.returncode == 1 and "another replica set" in done.stderr and TAKEN in done.stderr
    assert len(verifies(calls)) == 1 and not any("election" in c for c in calls)
    (tmp_path / "calls.log").unlink()
    done, calls = run_script(
        tmp_path, out, "kafka-1:9092", FAKE_VERIFY=LEAVING, SETTLE_SECONDS="2", VERIFY_INTERVAL="0.3"
    )
    assert done.returncode == 1 and "another replica set" in done.stderr
    # It polled again while the old replica could still leave (a missing one stops it at the first poll,
    # above), then gave up: how many polls fit in the settle time depends on the machine's load.
    assert 2 <= len(verifies(calls)) <= 12 and not any("election" in c for c in calls)


def test_rows_as_arrow_reads_them_map_and_json_throttles(tmp_path):
    _, rows = plan_rows()
    as_json = [dict(r, throttle=json.dumps(r["throttle"])) for r in rows]
    export_plan(as_json, tmp_path / "a")
    # Arrow's map<int,bigint> comes back from to_pylist() as a list of (key, value) pairs.
    table = pa.Table.from_pylist(
        [dict(r, throttle=list(r["throttle"].items())) for r in rows],
        schema=BATCHES_SCHEMA,
    )
    export_plan(table.to_pylist(), tmp_path / "b")
    assert (tmp_path / "a" / "run.sh").read_text() == (tmp_path / "b" / "run.sh").read_text()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"reassignment_json": "{not json"}, "reassignment_json is not valid JSON"),
        ({"reassignment_json": json.dumps({"version": 2, "partitions": []})}, "version"),
        (
            {
                "reassignment_json": json.dumps(
                    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}
                )
            },
            "distinct",
        ),
        ({"throttle": None}, "never run unthrottled"),
        ({"throttle": {1: 0}}, "must be > 0"),
        ({"kind": "teleport"}, "kind must be one of"),
        ({"batch": -1}, "batch must be an int"),
    ],
)
def test_bad_rows_are_rejected_before_anything_is_written(tmp_path, change, message):
    _, rows = plan_rows()
    rows[1].update(change)
    with pytest.raises(ExportError, match=message):
        export_plan(rows, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_out_dir_must_be_new_or_empty_unless_overwrite(tmp_path):
    _, rows = plan_rows()
    export_plan(rows, tmp_path)
    with pytest.raises(FileExistsError, match="not empty"):
        export_plan(rows, tmp_path)
    export_plan(rows, tmp_path, overwrite=True)


def test_a_fixed_bootstrap_placeholder_becomes_the_scripts_fallback(tmp_path):
    _, rows = plan_rows()
    export_plan(rows, tmp_path / "out", bootstrap_placeholder="kafka-1:9092,kafka-2:9092")
    done, calls = run_script(tmp_path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert all("--bootstrap-server kafka-1:9092,kafka-2:9092" in c for c in calls)


def test_rows_as_the_job_writes_them_json_throttle_notes_and_a_missing_throttle(tmp_path):
    _, rows = plan_rows()
    # balancer.spark.track.tracking: throttle as a JSON object with string keys, plus meets_deadline and note.
    job_rows = [
        dict(
            r,
            throttle=json.dumps({str(b): v for b, v in r["throttle"].items()}) if r["throttle"] else None,
            meets_deadline=True,
            note=None,
        )
        for r in rows
    ]
    job_rows[1]["note"] = "batch 1 cannot finish in 600 s\nwithin spare network capacity"
    export_plan(job_rows, tmp_path / "a")
    script = (tmp_path / "a" / "run.sh").read_text()
    assert "# note: batch 1 cannot finish in 600 s within spare network capacity" in script
    assert "note: batch 1 cannot finish" in (tmp_path / "a" / "README.txt").read_text()
    subprocess.run(["bash", "-n", str(tmp_path / "a" / "run.sh")], check=True)
    # No computed throttle (e.g. a broker without a capacity report): an error, unless given one rate.
    job_rows[1].update(throttle=None, note="no throttle computed: broker 4 has no capacity")
    with pytest.raises(ExportError, match=r"no throttle computed: broker 4.*--throttle"):
        export_plan(job_rows, tmp_path / "b")
    export_plan(job_rows, tmp_path / "b", fallback_throttle=50_000_000)
    script = (tmp_path / "b" / "run.sh").read_text()
    assert "--throttle 50000000" in script and "broker_throttle 1" not in script
    with pytest.raises(ValueError, match="fallback_throttle"):
        export_plan(job_rows, tmp_path / "c", fallback_throttle=0)
