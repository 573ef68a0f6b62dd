"""Decoding one record's value: Cruise Control's binary format beside our v1 JSON, per record, no Spark.

    .venv/bin/python benchmarks/cc_decode_bench.py [--records N] [--batch N] [--runs N]

Both formats describe the same cluster (the ingest benchmark's ``--quick`` 270-broker cluster)
at one instant:

- v1: the simulator's telemetry, one JSON record per replica and per broker, decoded by
  ``balancer.spark.ingest.json_values.decode_json`` into the parser's typed schema (what the Kafka source
  does in its reading task);
- Cruise Control: what its reporter would send for the same state, encoded as ``MetricSerde``
  does: PARTITION_SIZE for every replica, TOPIC_BYTES_IN/OUT and TOPIC_MESSAGES_IN_PER_SEC per
  (leader broker, topic), and per broker ALL_TOPIC_BYTES_IN/OUT, the replication totals and
  BROKER_CPU_UTIL; decoded by ``balancer.cruise_control.decode``.

Each list is repeated to ``--records`` values and decoded in Arrow batches of ``--batch`` values
(the source hands its decoder 20,000 at a time). The figure is wall ns per record, best of
``--runs``, in one process on one core.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import pyarrow as pa
from ingest_bench import QUICK, T0

from balancer import cruise_control as cc
from balancer import telemetry as tm
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster


def cruise_control_values(records: list[dict]) -> list[bytes]:
    """What Cruise Control's reporter sends for the state the v1 records describe."""
    out: list[bytes] = []
    topic_in: dict[tuple[int, str], float] = defaultdict(float)
    topic_out: dict[tuple[int, str], float] = defaultdict(float)
    topic_msgs: dict[tuple[int, str], float] = defaultdict(float)
    broker_in: dict[int, float] = defaultdict(float)
    broker_out: dict[int, float] = defaultdict(float)
    for r in records:
        if r["type"] != "partition":
            continue
        name = r["topic"].replace(".", "_")  # Kafka's metric scope does this
        out.append(
            cc.encode_partition_metric(
                cc.PARTITION_SIZE, r["ts"], r["broker"], name, r["partition"], float(r["size"])
            )
        )
        if r["leader"]:
            key = (r["broker"], name)
            topic_in[key] += r["bytes_in"]
            topic_out[key] += r["bytes_out"]
            topic_msgs[key] += r["messages_in"]
            broker_in[r["broker"]] += r["bytes_in"]
            broker_out[r["broker"]] += r["bytes_out"]
    for (broker, name), rate in topic_in.items():
        out.append(cc.encode_topic_metric(cc.TOPIC_BYTES_IN, T0, broker, name, rate))
        out.append(cc.encode_topic_metric(cc.TOPIC_BYTES_OUT, T0, broker, name, topic_out[(broker, name)]))
        out.append(
            cc.encode_topic_metric(cc.TOPIC_MESSAGES_IN_PER_SEC, T0, broker, name, topic_msgs[(broker, name)])
        )
    for r in records:
        if r["type"] == "broker":
            b = r["broker"]
            for metric, value in (
                (cc.ALL_TOPIC_BYTES_IN, broker_in[b]),
                (cc.ALL_TOPIC_BYTES_OUT, broker_out[b]),
                (cc.ALL_TOPIC_REPLICATION_BYTES_IN, 0.0),
                (cc.ALL_TOPIC_REPLICATION_BYTES_OUT, 0.0),
                (cc.BROKER_CPU_UTIL, r.get("cpu") or 0.3),
            ):
                out.append(cc.encode_broker_metric(metric, r["ts"], b, value))
    return out


def batches(values: list[bytes], records: int, batch: int) -> list[pa.Array]:
    repeated = (values * (records // len(values) + 1))[:records]
    return [pa.array(repeated[i : i + batch], pa.binary()) for i in range(0, records, batch)]


def best_ns(decode, arrays: list[pa.Array], runs: int) -> float:
    records = sum(len(a) for a in arrays)
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for array in arrays:
            decode(array)
        best = min(best, time.perf_counter() - started)
    return best * 1e9 / records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from balancer.spark.ingest.decoders import JsonValues
    from balancer.spark.ingest.parse import TYPED_SCHEMA

    records = SimulatedCluster(generate(ScenarioSpec(**QUICK)), noise=0.03, seed=1).telemetry(T0)
    v1 = [tm.encode(r) for r in records]
    ccv = cruise_control_values(records)
    mix = defaultdict(int)
    for v in ccv:
        mix[v[0]] += 1
    print(
        f"one instant of the cluster: {len(v1):,} v1 records ({sum(map(len, v1)) / len(v1):.0f} B avg); "
        f"{len(ccv):,} Cruise Control records ({sum(map(len, ccv)) / len(ccv):.0f} B avg: "
        f"{mix[2]:,} partition, {mix[1]:,} topic, {mix[0]:,} broker)"
    )

    cc_arrays = batches(ccv, args.records, args.batch)
    decoded = pa.concat_arrays([cc.decode(a) for a in cc_arrays])
    assert decoded.field("error").null_count == len(decoded), "every benchmark record must decode"
    json_values = JsonValues(TYPED_SCHEMA)  # what the Kafka source decodes v1 values with
    v1_arrays = batches(v1, args.records, args.batch)
    assert json_values.decode(v1_arrays[0]).null_count == 0, "every benchmark record must decode"

    cc_ns = best_ns(cc.decode, cc_arrays, args.runs)
    v1_ns = best_ns(json_values.decode, v1_arrays, args.runs)
    print(f"{args.records:,} values in batches of {args.batch:,}, best of {args.runs}:")
    print(f"  cruise_control.decode   {cc_ns:7.0f} ns/record")
    print(f"  json_values.decode_json {v1_ns:7.0f} ns/record (v1)")
    # v1 carries a replica's rates in its own record; Cruise Control spreads one replica's state over
    # its PARTITION_SIZE record and a share of the topic and broker records.
    per_replica = cc_ns * len(ccv) / max(1, mix[2])
    v1_per_replica = v1_ns * len(v1) / max(1, sum(r["type"] == "partition" for r in records))
    print(f"  per replica reported: cruise control {per_replica:.0f} ns, v1 {v1_per_replica:.0f} ns")


if __name__ == "__main__":
    main()
