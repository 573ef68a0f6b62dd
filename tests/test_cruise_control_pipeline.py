"""Cruise Control's reporter topic end to end.

Records byte for byte as ``MetricSerde`` writes them, on the real broker, metadata and capacities from
files, the job with ``--once``, loads checked against figures computed here from the same bytes."""

from __future__ import annotations

import json
import struct
from collections import defaultdict

import pytest
from confluent_kafka import Producer
from support import MINUTE, T0, job_config

from balancer.demo.cc_reporter import capacity_file, from_telemetry, metadata_snapshot
from balancer.demo.simulator import SimulatedCluster
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

pytestmark = pytest.mark.integration

MB = 1024**2


def _snapshot() -> dict:
    """Five brokers on two racks. 'orders.v2' has a dot; broker 3 leads no partition of 'clicks' and
    broker 4 leads nothing at all (it only follows)."""
    brokers = [
        {"id": b, "rack": f"r{b % 2}", "capacity": {"network_in": 50e6, "network_out": 80e6, "disk": 500e9}}
        for b in range(5)
    ]
    layout = {
        "orders.v2": [([0, 1], 9e6, 20e6, 40e9), ([1, 2], 3e6, 5e6, 12e9), ([2, 3], 1e6, 2e6, 3e9)],
        "clicks": [
            ([0, 3], 4e6, 4e6, 8e9),
            ([0, 4], 2e6, 1e6, 6e9),
            ([1, 4], 6e6, 9e6, 9e9),
            ([2, 4], 0.5e6, 0.5e6, 1e9),
        ],
        "logs": [([3, 0], 2e6, 0.0, 30e9), ([3, 1], 1e6, 0.0, 20e9)],
    }
    partitions = [
        {
            "topic": topic,
            "partition": i,
            "replicas": replicas,
            "leader": replicas[0],
            "bytes_in": bi,
            "bytes_out": bo,
            "size": size,
        }
        for topic, parts in layout.items()
        for i, (replicas, bi, bo, size) in enumerate(parts)
    ]
    return {"cluster": "cc-1", "brokers": brokers, "partitions": partitions}


def _malformed() -> dict[bytes, str]:
    """Bad values → a word their quarantine reason must hold."""
    good = struct.pack(">bbbqid", 0, 0, 5, T0, 1, 0.5)  # BROKER_CPU_UTIL
    topic = b"clicks"
    return {
        b"": "empty",
        good[:10]: "not a Cruise Control metric",  # truncated header
        good[:-3]: "not a Cruise Control metric",  # truncated value
        good + b"\x00": "not a Cruise Control metric",  # trailing bytes
        struct.pack(">bbbqid", 7, 0, 5, T0, 1, 0.5): "class",  # unknown class id
        struct.pack(">bbbqid", 0, 1, 5, T0, 1, 0.5): "version",  # unknown serde version
        struct.pack(">bbbqid", 0, 0, 99, T0, 1, 0.5): "type",  # unknown type id
        struct.pack(">bbbqid", 0, 0, 5, T0, 1, float("nan")): "finite",
        struct.pack(">bbbqid", 0, 0, 0, T0, 1, -5.0): "negative",
        struct.pack(">bbbqid", 0, 0, 0, 12345, 1, 5.0): "plausible",  # absurd time
        struct.pack(">bbbqid", 0, 0, 0, T0, 1, 1e300): "max_rate",
        struct.pack(">bbbqi", 2, 0, 4, T0, 1)
        + struct.pack(">i", len(topic))
        + topic
        + struct.pack(">id", 0, 1e30): "max_size",
        struct.pack(">bbbqi", 1, 0, 2, T0, 1)
        + struct.pack(">i", 4)
        + b"\xff\xfe\x00a"
        + struct.pack(">d", 1.0): "UTF-8",
        b"\xff\xfe\x00\x01garbage\x80": "not a Cruise Control metric",
        b'{"v":1,"type":"broker"}': "not a Cruise Control metric",  # a v1 record on this topic
        bytes(70_000): "max_value_bytes",
    }


def _decode(value: bytes) -> tuple:
    """An independent reader of MetricSerde's layout (big-endian, like Java's ByteBuffer)."""
    cls, _, mtype, ts, broker = struct.unpack_from(">bbbqi", value, 0)
    if cls == 0:
        return cls, mtype, ts, broker, None, None, struct.unpack_from(">d", value, 15)[0]
    (length,) = struct.unpack_from(">i", value, 15)
    topic = value[19 : 19 + length].decode()
    if cls == 1:
        return cls, mtype, ts, broker, topic, None, struct.unpack_from(">d", value, 19 + length)[0]
    partition, number = struct.unpack_from(">id", value, 19 + length)
    return cls, mtype, ts, broker, topic, partition, number


def expected_loads(values: list[bytes], snapshot: dict, window_start: int) -> dict[int, dict]:
    """Cruise Control's model for one window, from the records' bytes and the metadata.

    A partition's rates are its leader's topic rates (mean over the window) split evenly over the topic's
    partitions it leads; its size is the leader's latest report; network_out counts the leader's bytes_out +
    bytes_in × (RF − 1)."""
    rates: dict[tuple, list[float]] = defaultdict(list)
    sizes: dict[tuple, tuple[int, float]] = {}
    for value in values:
        cls, mtype, ts, broker, topic, partition, number = _decode(value)
        if not window_start <= ts < window_start + 5 * MINUTE:
            continue
        if cls == 1:
            rates[(broker, topic, mtype)].append(number)
        elif cls == 2 and mtype == 4 and ts >= sizes.get((broker, topic, partition), (-1, 0))[0]:
            sizes[(broker, topic, partition)] = (ts, number)
    led = defaultdict(int)
    for p in snapshot["partitions"]:
        led[(p["leader"], p["topic"])] += 1
    loads = {b["id"]: {"network_in": 0.0, "network_out": 0.0, "disk": 0.0} for b in snapshot["brokers"]}
    for p in snapshot["partitions"]:
        leader, mtopic = p["leader"], p["topic"].replace(".", "_")

        def mean(mtype: int, leader=leader, mtopic=mtopic) -> float:
            seen = rates.get((leader, mtopic, mtype), [])
            return sum(seen) / len(seen) if seen else 0.0

        bytes_in = mean(2) / led[(leader, p["topic"])]
        bytes_out = mean(3) / led[(leader, p["topic"])]
        size = sizes[(leader, mtopic, p["partition"])][1]
        for b in p["replicas"]:
            loads[b]["network_in"] += bytes_in
            loads[b]["disk"] += size
        loads[leader]["network_out"] += bytes_out + bytes_in * (len(p["replicas"]) - 1)
    return loads


def produce_pairs(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.max.bytes": 2_000_000})
    for key, value in pairs:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def cc_config(tmp_path, broker, topic: str, cluster: str, *extra: str):
    return job_config(
        tmp_path,
        broker.bootstrap_servers,
        topic,
        "source.format=cruise-control",
        f"source.cluster={cluster}",
        "metadata.source=file",
        f"metadata.path={tmp_path / f'{cluster}.metadata.json'}",
        f"capacity.path={tmp_path / 'capacity.json'}",
        f"checkpoint.path={tmp_path / f'{cluster}.checkpoints'}",
        "quality.enabled=true",
        *extra,
    )


def test_cruise_control_topic_lands_loads_and_plans(spark, broker, topic, tmp_path):
    snapshot = _snapshot()
    cluster = SimulatedCluster(snapshot, noise=0.05, seed=11)
    pairs = []
    for minute in range(12):
        # Broker 4 goes silent for the second window: that window fails the contract, it is not zero traffic.
        cluster.silent_brokers = {4} if 5 <= minute < 10 else set()
        pairs += from_telemetry(cluster.telemetry(T0 + minute * MINUTE), cpu=0.4)
    bad = _malformed()
    produce_pairs(broker.bootstrap_servers, topic, pairs[:40] + [(b"x", v) for v in bad] + pairs[40:])

    (tmp_path / "cc-1.metadata.json").write_text(json.dumps(metadata_snapshot(snapshot)))
    (tmp_path / "capacity.json").write_text(json.dumps(capacity_file(snapshot)))
    config = cc_config(tmp_path, broker, topic, "cc-1")
    job.run_until_idle(spark, job.start(spark, config, once=True))
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")

    # Every record exactly once: the valid ones in telemetry_raw, each bad one quarantined with its reason.
    raw = lakehouse.read("telemetry_raw")
    assert raw.count() == len(pairs)
    assert raw.select("kafka_partition", "kafka_offset").distinct().count() == len(pairs)
    assert {r["v"] for r in raw.select("v").distinct().collect()} == {0}
    assert raw.where("topic = 'orders_v2' AND metric = 'PARTITION_SIZE'").count() > 0
    quarantine = {
        bytes(r["value"]) if r["value"] is not None else b"": r["reason"]
        for r in lakehouse.read("telemetry_quarantine").collect()
    }
    assert len(quarantine) == len(bad)
    for value, word in bad.items():
        assert word.lower() in quarantine[value].lower(), (value[:40], quarantine[value])

    # Loads of the first window, against the model computed here from the same bytes.
    expected = expected_loads([v for _, v in pairs], snapshot, T0)
    rows = {
        r["broker"]: r
        for r in lakehouse.read("broker_load").where(f"window_start = timestamp_millis({T0})").collect()
    }
    assert set(rows) == set(expected)
    for b, figures in expected.items():
        for resource, value in figures.items():
            assert rows[b][resource] == pytest.approx(value, rel=1e-9, abs=1e-6), (b, resource)
        # Capacities from Cruise Control's file: KB/s and MB, converted with 1024.
        assert rows[b]["capacity_network_in"] == pytest.approx(50e6, rel=1e-6)
        assert rows[b]["capacity_disk"] == pytest.approx(500e9, rel=1e-6)
        assert rows[b]["rack"] == f"r{b % 2}"
    ranking = lakehouse.read("broker_ranking").where(f"window_start = timestamp_millis({T0})").collect()
    by_traffic = [r["broker"] for r in sorted(ranking, key=lambda r: r["rank_by_traffic"])]
    assert by_traffic == sorted(
        expected, key=lambda b: (-(expected[b]["network_in"] + expected[b]["network_out"]), b)
    )

    # The first window is planned; the second, with broker 4 silent, is skipped by the contract.
    plans = sorted(lakehouse.read("balance_plans").collect(), key=lambda p: p["window_end"])
    assert [p["cluster"] for p in plans] == ["cc-1", "cc-1"]
    assert plans[0]["status"] in ("proposed", "balanced"), plans[0]["reason"]
    assert plans[1]["status"] == "skipped" and "silent" in plans[1]["reason"], plans[1]["reason"]

    # The topology the windows were planned with is history in cluster_metadata.
    topology = lakehouse.read("cluster_metadata").collect()
    assert {(r["topic"], r["partition"]) for r in topology} == {
        (p["topic"], p["partition"]) for p in snapshot["partitions"]
    }

    # A second cluster: its own topic and job (checkpoint), the same lakehouse. Each job reads back only its
    # cluster's telemetry: the first cluster's windows neither close the second's early nor get planned twice.
    second = {**_snapshot(), "cluster": "cc-2"}
    pairs2 = [
        pair
        for minute in range(12)
        for pair in from_telemetry(SimulatedCluster(second, noise=0.0).telemetry(T0 + minute * MINUTE))
    ]
    topic2 = topic + "-cc2"
    broker.create_topic(topic2, partitions=2)
    produce_pairs(broker.bootstrap_servers, topic2, pairs2)
    (tmp_path / "cc-2.metadata.json").write_text(json.dumps(metadata_snapshot(second)))
    job.run_until_idle(spark, job.start(spark, cc_config(tmp_path, broker, topic2, "cc-2"), once=True))
    plans = lakehouse.read("balance_plans").collect()
    assert sorted((p["cluster"], p["status"] == "skipped") for p in plans) == [
        ("cc-1", False),
        ("cc-1", True),
        ("cc-2", False),
        ("cc-2", False),
    ]
    expected2 = expected_loads([v for _, v in pairs2], second, T0)
    rows2 = {
        r["broker"]: r
        for r in lakehouse.read("broker_load")
        .where(f"cluster = 'cc-2' AND window_start = timestamp_millis({T0})")
        .collect()
    }
    assert {b: rows2[b]["network_out"] for b in rows2} == pytest.approx(
        {b: f["network_out"] for b, f in expected2.items()}, rel=1e-9
    )


def test_metadata_polled_through_the_admin_api_lands_in_cluster_metadata(spark, broker, topic, tmp_path):
    from balancer.spark.land.topology import TopologyLog

    broker.create_topic(topic + ".polled", partitions=3)
    config = cc_config(
        tmp_path,
        broker,
        topic,
        "polled",
        "metadata.source=kafka",
        f"metadata.bootstrap_servers={broker.bootstrap_servers}",
    )
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")
    lakehouse.create_all()
    log = TopologyLog(lakehouse, config)
    assert log.refresh(app_id="poll", batch_id=0) > 0
    rows = lakehouse.read("cluster_metadata").where(f"topic = '{topic}.polled'").collect()
    assert sorted(r["partition"] for r in rows) == [0, 1, 2]
    assert all(r["cluster"] == "polled" and r["replicas"] and r["leader"] in r["replicas"] for r in rows)
    assert lakehouse.read("broker_metadata").where("present").count() >= 1

    # Read again with nothing changed: nothing appended; a restart compares with what the tables hold.
    assert log.refresh(app_id="poll", batch_id=1, force=True) == 0
    assert TopologyLog(lakehouse, config).refresh(app_id="poll-2", batch_id=0) == 0
    # A new partition is a change.
    broker.create_topic(topic + ".later", partitions=1)
    assert log.refresh(app_id="poll", batch_id=2, force=True) == 1
    assert lakehouse.read("cluster_metadata").where(f"topic = '{topic}.later'").count() == 1
