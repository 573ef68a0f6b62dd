"""The two ways in, side by side: python connector + delta-rs against Spark's native connector + delta-spark.

    .venv/bin/python benchmarks/paths_bench.py            # 270 brokers, 1.3M replicas, 3 sim minutes a format
    .venv/bin/python benchmarks/paths_bench.py --quick    # 270 brokers, ~130k replicas

A real Apache Kafka broker (one KRaft node from jvm/lib, on this box) holds a backlog: each sim minute is one
full telemetry round of the 1.3M-replica cluster (v1: one record per replica and broker; Cruise Control's
reporter format: what its reporter sends for the same moment). For each format and path the job is submitted
with ``spark-submit.sh --once`` (local[2]) and drains the backlog end to end: read, parse, land in Delta,
close the windows, rank, plan. Printed per run: records, wall seconds, records/s, and CPU µs per record of
the whole job (driver, JVM, Python workers), start-up included. A plain confluent-kafka consumer reading the
same topic is the ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from confluent_kafka import Producer
from ingest_bench import (  # the same 1.3M-replica cluster as the ingest benchmark
    FULL,
    MINUTE_MS,
    T0,
    plain_consumer,
)

from balancer import telemetry as tm
from balancer.demo.cc_reporter import capacity_file, from_telemetry, metadata_snapshot
from balancer.demo.kafka_cluster import KafkaCluster
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"python + delta-rs": ("python", "delta-rs"), "native + delta-spark": ("native", "delta-spark")}


def rounds(spec: ScenarioSpec, minutes: int) -> tuple[dict[str, list[tuple[bytes | None, bytes]]], dict]:
    """Per format, the (key, value) records of ``minutes`` sim minutes; and the cluster's snapshot."""
    cluster = SimulatedCluster(generate(spec), noise=0.03, seed=1)
    v1, cc = [], []
    for minute in range(minutes):
        records = cluster.telemetry(T0 + minute * MINUTE_MS)
        v1 += [(f"{r['cluster']}/{r['broker']}".encode(), tm.encode(r)) for r in records]
        cc += from_telemetry(records)
    return {"v1": v1, "cruise-control": cc}, cluster.snapshot()


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "compression.type": "lz4",
        }
    )
    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def submit(config: dict, workdir: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of the whole job (all its processes), exit code."""
    path = workdir / "balancer.yaml"
    path.write_text(yaml.safe_dump(config))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--master", "local[2]", "--once", "--config", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "BALANCER_LOG_DIR": str(workdir / "logs")},
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        print(result.stdout[-2000:], result.stderr[-2000:], file=sys.stderr)
    return wall, cpu, result.returncode


def landed(root: Path) -> tuple[int, int]:
    """Records landed (valid + quarantined) and windows planned."""
    from deltalake import DeltaTable

    records = sum(DeltaTable(str(root / t)).count() for t in ("telemetry_raw", "telemetry_quarantine"))
    return records, DeltaTable(str(root / "balance_plans")).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~130k replicas instead of 1.3M")
    parser.add_argument(
        "--minutes",
        type=int,
        default=3,
        help="sim minutes of backlog per format (one-minute windows: all but the last two are planned)",
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the telemetry topic")
    parser.add_argument("--formats", nargs="+", default=["v1", "cruise-control"])
    args = parser.parse_args()
    spec = ScenarioSpec(**(dict(FULL, topics=300) if args.quick else FULL))
    work = Path(tempfile.mkdtemp(prefix="paths-bench-"))
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; work in {work}")
    started = time.perf_counter()
    records, snapshot = rounds(spec, args.minutes)
    print(
        f"encoded {', '.join(f'{f}: {len(r):,}' for f, r in records.items())} records in "
        f"{time.perf_counter() - started:.0f} s"
    )
    (work / "metadata.json").write_text(json.dumps(metadata_snapshot(snapshot)))
    (work / "capacity.json").write_text(json.dumps(capacity_file(snapshot)))
    results = []
    with KafkaCluster(work / "kafka", size=1, heap="1g") as kafka:
        for fmt in args.formats:
            topic = f"metrics-{fmt}"
            kafka.create_topic(topic, partitions=args.partitions)
            produce(kafka.bootstrap_servers, topic, records[fmt])
            n = len(records[fmt])
            ceiling = plain_consumer(kafka.bootstrap_servers, topic, args.partitions, n)
            results.append((fmt, "plain consumer (ceiling)", n, n / ceiling, None, None))
            for name, (connector, engine) in PATHS.items():
                run = work / f"{fmt}-{connector}-{engine}"
                run.mkdir()
                source = {
                    "bootstrap_servers": kafka.bootstrap_servers,
                    "topic": topic,
                    "connector": connector,
                    "format": fmt,
                    "max_records_per_batch": 1_000_000,
                }
                config = {
                    "source": source,
                    "lakehouse": {"path": str(run / "lakehouse"), "engine": engine},
                    "checkpoint": {"path": str(run / "checkpoints")},
                    "windows": {"size": "1 minute", "slide": "1 minute", "watermark": "1 second"},
                    "spark": {"conf": {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4"}},
                }
                if fmt == "cruise-control":
                    source["cluster"] = spec.cluster
                    config["metadata"] = {"source": "file", "path": str(work / "metadata.json")}
                    config["capacity"] = {"path": str(work / "capacity.json")}
                wall, cpu, code = submit(config, run)
                count, plans = landed(run / "lakehouse") if code == 0 else (0, 0)
                results.append((fmt, name, count, wall, cpu, plans))
                print(f"  {fmt:15s} {name:22s} exit {code}: {count:,} records in {wall:.0f} s", flush=True)
    header = f"{'records':>10s} {'wall s':>8s} {'rec/s':>9s} {'CPU µs/rec':>11s} {'windows planned':>16s}"
    print(f"\n{'format':15s} {'path':26s} {header}")
    for fmt, name, count, wall, cpu, plans in results:
        rate = count / wall if wall else 0
        per = f"{cpu / count * 1e6:11.1f}" if cpu and count else f"{'':11s}"
        planned = f"{plans:16d}" if plans is not None else ""
        print(f"{fmt:15s} {name:26s} {count:10,d} {wall:8.1f} {rate:9,.0f} {per} {planned}")
    print(f"(load at the end {os.getloadavg()[0]:.1f}; wall and CPU include JVM start-up and the final plan)")


if __name__ == "__main__":
    main()
