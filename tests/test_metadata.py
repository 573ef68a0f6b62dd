"""Cluster topology: snapshot files (and their errors), change detection, and the Admin API of the real
embedded broker."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from balancer.metadata import (
    ClusterMetadata,
    MetadataError,
    MetadataPollError,
    PartitionInfo,
    changed_rows,
    poll_metadata,
    read_metadata_file,
    topology_rows,
)

AT = datetime(2026, 11, 24, 3, 10, tzinfo=UTC)
GOLDEN = Path(__file__).parent / "planner" / "golden" / "restarted.snapshot.json"


def write(tmp_path: Path, doc) -> Path:
    path = tmp_path / "metadata.json"
    path.write_text(json.dumps(doc))
    return path


DOC = {
    "cluster": "prod-eu-1",
    "brokers": [{"id": 1, "rack": "eu-1a"}, {"id": 2, "rack": "eu-1b"}, {"id": 3}, {"id": 4, "rack": ""}],
    "partitions": [
        {"topic": "orders", "partition": 1, "replicas": [2, 3, 1], "leader": 3, "isr": [3, 2]},
        {"topic": "a.b", "partition": 0, "replicas": [1, 2], "leader": 1},
        {"topic": "orders", "partition": 0, "replicas": [1, 2, 3], "leader": -1, "bytes_in": 5.0},
    ],
}


def test_read_a_metadata_file(tmp_path):
    meta = read_metadata_file(write(tmp_path, DOC))
    assert meta.cluster == "prod-eu-1"
    assert dict(meta.brokers) == {1: "eu-1a", 2: "eu-1b", 3: None, 4: None}
    assert meta.partitions == (  # sorted; isr defaults to replicas; -1 is no leader; loads ignored
        PartitionInfo("a.b", 0, (1, 2), 1, (1, 2)),
        PartitionInfo("orders", 0, (1, 2, 3), None, (1, 2, 3)),
        PartitionInfo("orders", 1, (2, 3, 1), 3, (3, 2)),
    )
    assert read_metadata_file(write(tmp_path, DOC), cluster="prod-eu-1") == meta
    assert read_metadata_file(write(tmp_path, {**DOC, "cluster": None}), cluster="prod-eu-1") == meta


def test_a_planner_snapshot_is_a_metadata_file():
    meta = read_metadata_file(GOLDEN)
    snapshot = json.loads(GOLDEN.read_text())
    assert meta.cluster == snapshot["cluster"]
    assert sorted(meta.brokers) == sorted(b["id"] for b in snapshot["brokers"])
    assert len(meta.partitions) == len(snapshot["partitions"])
    first = min(snapshot["partitions"], key=lambda p: (p["topic"], p["partition"]))
    assert meta.partitions[0] == PartitionInfo(
        first["topic"],
        first["partition"],
        tuple(first["replicas"]),
        first["leader"],
        tuple(first["replicas"]),
    )


def part(**fields):
    return {"topic": "orders", "partition": 0, "replicas": [1, 2], "leader": 1, **fields}


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "expected a JSON object"),
        ({**DOC, "cluster": "other"}, "'cluster' is 'other', but this job reads cluster 'prod-eu-1'"),
        ({"brokers": [], "partitions": []}, "'cluster': missing"),
        ({**DOC, "brokers": None}, "'brokers': expected a list"),
        ({**DOC, "brokers": [{"id": "1"}]}, r"brokers\[0\].id: expected an integer"),
        ({**DOC, "brokers": [{"id": 1}, {"id": 1}]}, r"brokers\[1\]: broker 1 is listed twice"),
        ({**DOC, "brokers": [{"id": 1, "rack": 5}]}, r"brokers\[0\] \(broker 1\).rack: expected a string"),
        ({**DOC, "partitions": {}}, "'partitions': expected a list"),
        (
            {**DOC, "partitions": [part(topic="bad topic")]},
            r"partitions\[0\].topic: expected a Kafka topic name",
        ),
        ({**DOC, "partitions": [part(partition=-1)]}, r"partitions\[0\].partition: expected an integer"),
        ({**DOC, "partitions": [part(), part()]}, r"partitions\[1\] \(orders-0\): partition listed twice"),
        ({**DOC, "partitions": [part(replicas=[])]}, r"\(orders-0\).replicas: expected a non-empty list"),
        ({**DOC, "partitions": [part(replicas=[1, 1])]}, r"\(orders-0\).replicas: a broker is listed twice"),
        (
            {**DOC, "partitions": [part(replicas=[1, True])]},
            r"\(orders-0\).replicas\[1\]: expected an integer",
        ),
        (
            {**DOC, "partitions": [part(leader=3)]},
            r"\(orders-0\).leader: 3 is not one of its replicas \[1, 2\]",
        ),
        ({**DOC, "partitions": [part(isr=[1, 5])]}, r"\(orders-0\).isr: 5 is not one of its replicas"),
    ],
)
def test_file_errors_name_the_item(tmp_path, doc, message):
    with pytest.raises(MetadataError, match=message):
        read_metadata_file(write(tmp_path, doc), cluster=None if "missing" in message else "prod-eu-1")


def test_unreadable_files(tmp_path):
    with pytest.raises(MetadataError, match=r"missing\.json: cannot read it"):
        read_metadata_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(MetadataError, match=r"bad\.json: not valid JSON"):
        read_metadata_file(bad)
    assert issubclass(MetadataError, ValueError)


def meta(*partitions: PartitionInfo, cluster: str = "c") -> ClusterMetadata:
    return ClusterMetadata(cluster=cluster, brokers={1: None, 2: None, 3: None}, partitions=tuple(partitions))


def test_topology_rows():
    rows = topology_rows(meta(PartitionInfo("t", 0, (1, 2), 1, (1,))), AT)
    assert rows == [
        {
            "cluster": "c",
            "observed_at": AT,
            "topic": "t",
            "partition": 0,
            "replicas": [1, 2],
            "leader": 1,
            "isr": [1],
        }
    ]


def test_changed_rows():
    a0, a1 = PartitionInfo("a", 0, (1, 2), 1, (1, 2)), PartitionInfo("a", 1, (2, 3), 2, (2, 3))
    b0 = PartitionInfo("b", 0, (3, 1), 3, (3, 1))
    before = meta(a0, a1, b0)
    assert changed_rows(None, before, AT) == topology_rows(before, AT)
    assert changed_rows(before, before, AT) == []
    # ISR listed in another order: nothing changed.
    assert changed_rows(before, meta(a0, a1, PartitionInfo("b", 0, (3, 1), 3, (1, 3))), AT) == []
    after = meta(
        PartitionInfo("a", 0, (2, 1), 1, (1, 2)),  # replica order: another preferred leader
        PartitionInfo("a", 1, (2, 3), 3, (2, 3)),  # leader
        PartitionInfo("a", 2, (1, 3), 1, (1, 3)),  # new
        PartitionInfo("c", 0, (1,), None, ()),
    )  # new, offline; b-0 deleted
    rows = changed_rows(before, after, AT)
    assert [(r["topic"], r["partition"], r["replicas"], r["leader"], r["isr"]) for r in rows] == [
        ("a", 0, [2, 1], 1, [1, 2]),
        ("a", 1, [2, 3], 3, [2, 3]),
        ("a", 2, [1, 3], 1, [1, 3]),
        ("b", 0, [], None, []),
        ("c", 0, [1], None, []),
    ]
    assert changed_rows(before, meta(a0, a1, PartitionInfo("b", 0, (3, 1), 3, (3,))), AT)[0]["isr"] == [3]
    with pytest.raises(MetadataError, match="previous: cluster 'x'"):
        changed_rows(meta(cluster="x"), before, AT)
    with pytest.raises(MetadataError, match="observed_at"):
        changed_rows(None, before, "03:10")


def test_poll_arguments_are_checked_before_connecting():
    with pytest.raises(MetadataError, match="bootstrap_servers"):
        poll_metadata(" ", {}, "c")
    with pytest.raises(MetadataError, match=r"options: 'bootstrap\.servers'"):
        poll_metadata("h:1", {"bootstrap.servers": "x:1"}, "c")
    with pytest.raises(MetadataError, match="cluster"):
        poll_metadata("h:1", {}, "")
    with pytest.raises(MetadataError, match="timeout_s"):
        poll_metadata("h:1", {}, "c", timeout_s=0)


def test_poll_errors_never_show_secrets():
    with pytest.raises(MetadataPollError) as caught:
        poll_metadata(
            "127.0.0.1:1", {"security.protocol": "hunter2", "sasl.password": "hunter2"}, "c", timeout_s=2
        )
    assert "hunter2" not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.integration
@pytest.mark.no_spark
def test_poll_the_embedded_broker(broker):
    topic = f"meta.{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=3)
    first = poll_metadata(broker.bootstrap_servers, {}, "embedded", timeout_s=20)
    assert first.cluster == "embedded" and first.brokers
    mine = [p for p in first.partitions if p.topic == topic]
    assert [p.partition for p in mine] == [0, 1, 2]
    for p in mine:
        assert len(p.replicas) == 1 and p.leader == p.replicas[0] and p.leader in first.brokers
        assert p.isr == p.replicas
    # Tansu answers DescribeCluster without racks: each broker's rack is its host, as in Cruise Control.
    assert set(first.brokers.values()) == {"127.0.0.1"}

    other = f"meta-{uuid.uuid4().hex[:8]}"
    broker.create_topic(other, partitions=2)
    second = poll_metadata(broker.bootstrap_servers, {}, "embedded", timeout_s=20)
    rows = changed_rows(first, second, AT)
    assert {(r["topic"], r["partition"]) for r in rows} >= {(other, 0), (other, 1)}
    assert all(r["topic"] != topic for r in rows)


def _reassign(kafka, plan: dict, action: str) -> str:
    """Kafka's own kafka-reassign-partitions (``--execute`` / ``--verify``) from jvm/lib/kafka."""
    import json
    import subprocess
    import tempfile

    from balancer.jvm import JarSet, classpath

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan, f)
    result = subprocess.run(
        [
            "java",
            "-Xmx128m",
            "-cp",
            classpath(JarSet.KAFKA),
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--bootstrap-server",
            kafka.bootstrap_servers,
            "--reassignment-json-file",
            f.name,
            f"--{action}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.integration
@pytest.mark.no_spark
def test_poll_real_kafka_follows_racks_and_a_reassignment(kafka):
    """Real Kafka: racks from DescribeCluster; replicas, leader and ISR as the brokers report them, before
    and after Kafka's own tool moves a partition; the change is the only changed row."""
    import time

    topic = f"meta-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, assignment=[[1, 2], [2, 3]])
    first = poll_metadata(kafka.bootstrap_servers, {}, "real", timeout_s=30)
    assert dict(first.brokers) == {1: "rack-a", 2: "rack-b", 3: "rack-c"}
    mine = {p.partition: p for p in first.partitions if p.topic == topic}
    assert (mine[0].replicas, mine[0].leader, set(mine[0].isr)) == ((1, 2), 1, {1, 2})
    assert (mine[1].replicas, mine[1].leader) == ((2, 3), 2)

    _reassign(
        kafka, {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]}]}, "execute"
    )
    deadline = time.monotonic() + 90
    while "is completed" not in _reassign(
        kafka, {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]}]}, "verify"
    ):
        assert time.monotonic() < deadline, "the reassignment did not complete in 90 s"
        time.sleep(1)
    # Kafka moves the replicas; the preferred leader (3) takes over only on an election.
    second = poll_metadata(kafka.bootstrap_servers, {}, "real", timeout_s=30)
    moved = next(p for p in second.partitions if p.topic == topic and p.partition == 0)
    assert moved.replicas == (3, 2) and set(moved.isr) == {2, 3} and moved.leader in (2, 3)
    rows = changed_rows(first, second, AT)
    assert [(r["topic"], r["partition"]) for r in rows if r["topic"] == topic] == [(topic, 0)]
