"""``balancer plan``: reads a snapshot file, writes Kafka's JSON files, honours config overrides."""

from __future__ import annotations

import argparse
import json

from balancer.cli import plan as plan_cli
from balancer.config import load_config
from balancer.demo.scenarios import ScenarioSpec, generate


def parse(argv):
    parser = argparse.ArgumentParser()
    plan_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_plan_command_writes_reassignment_and_election(tmp_path, capsys):
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(generate(ScenarioSpec(brokers=6, topics=20, new_empty_brokers=3, seed=2))))
    out, elect = tmp_path / "out" / "plan.json", tmp_path / "elect.json"
    args = parse(["plan", str(snap), "-o", str(out), "--election-out", str(elect)])
    assert plan_cli.run(args, load_config(None, ["balancer.balance_threshold=1.2"])) == 0
    reassignment = json.loads(out.read_text())
    assert reassignment["version"] == 1 and reassignment["partitions"]
    assert all(set(e) == {"topic", "partition", "replicas", "log_dirs"} for e in reassignment["partitions"])
    assert "partitions" in json.loads(elect.read_text())
    printed = capsys.readouterr().out
    assert "network_in" in printed and "replica moves" in printed


def test_plan_command_reports_a_bad_snapshot(tmp_path, capsys):
    snap = tmp_path / "snap.json"
    snap.write_text(
        json.dumps(
            {
                "brokers": [{"id": 1, "capacity": {"network_in": 1, "network_out": 1, "disk": 1}}],
                "partitions": [
                    {
                        "topic": "t",
                        "partition": 0,
                        "replicas": [1, 2],
                        "leader": 1,
                        "bytes_in": 1,
                        "bytes_out": 1,
                        "size": 1,
                    }
                ],
            }
        )
    )
    args = parse(["plan", str(snap), "-o", str(tmp_path / "p.json")])
    assert plan_cli.run(args, load_config()) == 2
    assert "unknown broker(s) [2]" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_plan_command_missing_file(tmp_path, capsys):
    args = parse(["plan", str(tmp_path / "nope.json"), "-o", str(tmp_path / "p.json")])
    assert plan_cli.run(args, load_config()) == 2
    assert "not found" in capsys.readouterr().err


def test_plan_command_drains_brokers(tmp_path, capsys):
    snap = tmp_path / "snap.json"
    snapshot = generate(ScenarioSpec(brokers=6, racks=3, topics=20, seed=3))
    snap.write_text(json.dumps(snapshot))
    out = tmp_path / "plan.json"
    args = parse(["plan", str(snap), "-o", str(out), "--drain", "4,5"])
    assert plan_cli.run(args, load_config(None, ["balancer.drain_brokers=[3]"])) == 0
    final = {(p["topic"], p["partition"]): p["replicas"] for p in snapshot["partitions"]}
    for entry in json.loads(out.read_text())["partitions"]:
        final[(entry["topic"], entry["partition"])] = entry["replicas"]
    assert not any({3, 4, 5} & set(reps) for reps in final.values())


def test_plan_command_rejects_a_bad_drain(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit):
        parse(["plan", "s.json", "-o", "p.json", "--drain", "7,x"])
    assert "--drain takes comma-separated broker ids" in capsys.readouterr().err
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(generate(ScenarioSpec(brokers=6, racks=3, topics=5, seed=3))))
    args = parse(["plan", str(snap), "-o", str(tmp_path / "p.json"), "--drain", "42"])
    assert plan_cli.run(args, load_config()) == 2
    assert "broker(s) [42] not in" in capsys.readouterr().err
