"""Cruise Control's metrics reporter, simulated: the records a simulated cluster's brokers would publish.

For the demo, tests and benchmarks. Each broker reports what the reporter reads from Kafka's meters
(``CruiseControlMetricsReporter``): per broker BROKER_CPU_UTIL and its all-topic byte rates; per topic it
leads partitions of, TOPIC_BYTES_IN / TOPIC_BYTES_OUT / TOPIC_MESSAGES_IN_PER_SEC summed over those
partitions (a topic's meters exist only on its leaders; no meter for a topic with no traffic); per replica
it hosts, PARTITION_SIZE. Topic names as Kafka's metric scopes spell them ('.' as '_').
"""

from __future__ import annotations

from collections import defaultdict

from balancer import cruise_control as cc


def metric_topic(topic: str) -> str:
    return topic.replace(".", "_")


def from_telemetry(records: list[dict], *, cpu: float = 0.35) -> list[tuple[bytes, bytes]]:
    """v1 telemetry (``SimulatedCluster.telemetry``) as the (key, value) records Cruise Control's reporter
    would send for the same moment: the same brokers, leaders, rates and sizes."""
    out: list[tuple[bytes, bytes]] = []
    topic_rates: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    all_topic: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    ts = None
    for r in records:
        ts = r["ts"]
        if r["type"] != "partition":
            continue
        broker, topic = r["broker"], metric_topic(r["topic"])
        out.append(
            (
                str(broker).encode(),
                cc.encode_partition_metric(
                    cc.PARTITION_SIZE, ts, broker, topic, r["partition"], float(r["size"])
                ),
            )
        )
        if r["leader"]:
            rates = topic_rates[(broker, topic)]
            rates[0] += r["bytes_in"]
            rates[1] += r["bytes_out"]
            rates[2] += r["messages_in"]
            all_topic[broker][0] += r["bytes_in"]
            all_topic[broker][1] += r["bytes_out"]
    for (broker, topic), (bytes_in, bytes_out, messages_in) in sorted(topic_rates.items()):
        key = topic.encode()
        out.append((key, cc.encode_topic_metric(cc.TOPIC_BYTES_IN, ts, broker, topic, bytes_in)))
        out.append((key, cc.encode_topic_metric(cc.TOPIC_BYTES_OUT, ts, broker, topic, bytes_out)))
        out.append(
            (key, cc.encode_topic_metric(cc.TOPIC_MESSAGES_IN_PER_SEC, ts, broker, topic, messages_in))
        )
    for r in records:
        if r["type"] != "broker":
            continue
        broker = r["broker"]
        key = str(broker).encode()
        value = r.get("cpu", cpu)
        out.append(
            (
                key,
                cc.encode_broker_metric(cc.BROKER_CPU_UTIL, r["ts"], broker, cpu if value is None else value),
            )
        )
        bytes_in, bytes_out = all_topic.get(broker, (0.0, 0.0))
        out.append((key, cc.encode_broker_metric(cc.ALL_TOPIC_BYTES_IN, r["ts"], broker, bytes_in)))
        out.append((key, cc.encode_broker_metric(cc.ALL_TOPIC_BYTES_OUT, r["ts"], broker, bytes_out)))
    return out


def metadata_snapshot(snapshot: dict) -> dict:
    """A planner snapshot reduced to what ``metadata.source: file`` reads.

    Brokers, racks, replicas and leaders."""
    return {
        "cluster": snapshot["cluster"],
        "brokers": [{"id": b["id"], "rack": b.get("rack")} for b in snapshot["brokers"]],
        "partitions": [
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "replicas": list(p["replicas"]),
                "leader": p["leader"],
            }
            for p in snapshot["partitions"]
        ],
    }


def capacity_file(snapshot: dict) -> dict:
    """The snapshot's broker capacities as Cruise Control's ``capacity.json`` (DISK MB, NW KB/s, strings)."""
    return {
        "brokerCapacities": [
            {
                "brokerId": str(b["id"]),
                "capacity": {
                    "DISK": f"{b['capacity']['disk'] / 1024**2:.6f}",
                    "CPU": "100",
                    "NW_IN": f"{b['capacity']['network_in'] / 1024:.6f}",
                    "NW_OUT": f"{b['capacity']['network_out'] / 1024:.6f}",
                },
                "doc": f"broker {b['id']}",
            }
            for b in snapshot["brokers"]
        ]
    }
