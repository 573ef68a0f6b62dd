"""The landing step, stage by stage: Kafka → kafka_py source → parse → cache, on local[2].

    .venv/bin/python benchmarks/landing_bench.py [--minutes N] [--runs N]

Produces N sim minutes of the 270-broker / 127,602-replica bench cluster (the ingest benchmark's
``--quick`` cluster, ~128k records a minute) into the embedded broker, then in one process:

- plain consumer: confluent-kafka reading the topic, nothing else (the ceiling);
- read → noop: ``spark.read.format("kafka_py")``, values untouched;
- read + parse, JSON decoded by Spark: ``parse_telemetry`` with ``from_json`` on every value
  (the design before the source decoded values);
- read + parse, JSON decoded by the source: the source's JSON decoder (``JsonValues``) (Arrow's JSON reader
  in the reading task), ``from_json`` only where the source left a value to Spark (the job's path);
- the same two followed by what the sink does first with a batch: cache it, count it, read it back;
- land: the sink's own landing step (``BalancerSink.land``: cache, one pass writing
  ``telemetry_raw`` and ``telemetry_quarantine`` on delta-rs and summing the ingest contract's
  figures, the contract) into a fresh lakehouse per run, with the time of each of its steps.

Each figure is records/s, best of ``--runs``, with the CPU seconds the Python workers and the JVM
spent per run (the machine has 2 cores: CPU is what limits the job, not wall time alone).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from confluent_kafka import Producer
from cpu import spark_cpu_seconds
from ingest_bench import MINUTE_MS, QUICK, T0, Round, plain_consumer
from pyspark import StorageLevel
from pyspark.sql import functions as F

from balancer.config import load_config
from balancer.demo.embedded_broker import EmbeddedBroker
from balancer.demo.scenarios import ScenarioSpec
from balancer.spark.ingest.decoders import JsonValues
from balancer.spark.ingest.kafka import KafkaSource
from balancer.spark.ingest.parse import TYPED_SCHEMA, parse_telemetry
from balancer.spark.session import build_session

TOPIC = "landing-bench"


def produce(bootstrap: str, rnd: Round, minutes: int) -> int:
    return produce_minutes(bootstrap, TOPIC, minutes, lambda ts: zip(rnd.keys, rnd.at(ts)))


def produce_minutes(bootstrap: str, topic: str, minutes: int, pairs_at) -> int:
    """Sim minutes of (key, value) pairs (``pairs_at(ts)``) into ``topic``; returns the records sent."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "compression.type": "none",
        }
    )
    count = 0
    for minute in range(minutes):
        for key, value in pairs_at(T0 + minute * MINUTE_MS):
            while True:
                try:
                    producer.produce(topic, key=key, value=value)
                    break
                except BufferError:
                    producer.poll(0.01)
            count += 1
        producer.flush(120)
    return count


def cpu_seconds() -> tuple[float, float]:
    """(JVM, Python workers) CPU seconds so far, of this process's Spark only."""
    jvm, workers, _ = spark_cpu_seconds()
    return jvm, workers


def measure(spark, label: str, action, records: int, runs: int) -> dict:
    best, cpu = float("inf"), []
    for _ in range(runs):
        jvm0, py0 = cpu_seconds()
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
        jvm1, py1 = cpu_seconds()
        cpu.append((jvm1 - jvm0, py1 - py0))
    jvm = min(c[0] for c in cpu)
    py = min(c[1] for c in cpu)
    row = {
        "step": label,
        "rate": records / best,
        "seconds": best,
        "jvm_us": jvm / records * 1e6,
        "py_us": py / records * 1e6,
    }
    print(
        f"{label:<58} {row['rate']:>10,.0f} rec/s  {best:6.1f} s   JVM {row['jvm_us']:5.2f} µs/rec   "
        f"Python workers {row['py_us']:5.2f} µs/rec",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--minutes", type=int, default=4, help="sim minutes of telemetry (~128k records each)"
    )
    parser.add_argument("--runs", type=int, default=2, help="runs per step; the best is reported")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    rnd = Round(ScenarioSpec(**QUICK))
    spark = build_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    spark.dataSource.register(KafkaSource)
    decoding = KafkaSource.decoding(JsonValues(TYPED_SCHEMA))
    spark.dataSource.register(decoding)
    with EmbeddedBroker() as broker:
        broker.create_topic(TOPIC, partitions=args.partitions)
        records = produce(broker.bootstrap_servers, rnd, args.minutes)
        print(
            f"{records:,} records ({rnd.replicas:,} replicas x {args.minutes} sim minutes, "
            f"{sum(map(len, rnd.values)) / len(rnd):.0f} bytes each) on {args.partitions} partitions; "
            f"load {' / '.join(f'{x:.1f}' for x in os.getloadavg())}\n",
            flush=True,
        )

        def kafka(decode: bool):
            return (
                spark.read.format(decoding.name() if decode else KafkaSource.name())
                .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                .option("subscribe", TOPIC)
                .option("startingOffsets", "earliest")
                .load()
            )

        def noop(frame):
            return lambda: frame.write.format("noop").mode("overwrite").save()

        def land(frame):
            def run():
                from balancer.spark.lakehouse import Lakehouse
                from balancer.spark.pipeline import BalancerSink

                workdir = Path(tempfile.mkdtemp(prefix="landing-bench-"))
                try:
                    config = load_config(
                        None,
                        [
                            f"lakehouse.path={workdir / 'lakehouse'}",
                            "lakehouse.engine=delta-rs",
                            f"checkpoint.path={workdir / 'checkpoints'}",
                        ],
                    )
                    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")
                    lakehouse.create_all()
                    sink = BalancerSink(lakehouse, config, workdir / "checkpoints", app_id="landing-bench")
                    assert sink.land(frame, 0, None) is not None
                    print(
                        "      steps: " + ", ".join(f"{t} {s:.1f} s" for t, s in sink.batch_seconds.items()),
                        flush=True,
                    )
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)

            return run

        def cached(frame):
            def run():
                batch = frame.persist(StorageLevel.MEMORY_AND_DISK)
                batch.count()
                batch.where(F.col("quarantine_reason").isNull()).agg(F.max("ts")).first()
                batch.unpersist()

            return run

        parsed = {
            decode: parse_telemetry(kafka(decode), max_value_bytes=65536, max_rate=1e13, max_size=1e15)
            for decode in (False, True)
        }
        best_ceiling = max(
            plain_consumer(broker.bootstrap_servers, TOPIC, args.partitions, records)
            for _ in range(args.runs)
        )
        print(f"{'plain confluent-kafka consumer (ceiling)':<58} {best_ceiling:>10,.0f} rec/s", flush=True)
        measure(spark, "read (kafka_py) → noop", noop(kafka(False)), records, args.runs)
        measure(spark, "read, JSON decoded by the source → noop", noop(kafka(True)), records, args.runs)
        measure(spark, "read + parse, JSON decoded by Spark → noop", noop(parsed[False]), records, args.runs)
        measure(
            spark, "read + parse, JSON decoded by the source → noop", noop(parsed[True]), records, args.runs
        )
        measure(
            spark,
            "read + parse (Spark decodes) + cache + count + max(ts)",
            cached(parsed[False]),
            records,
            args.runs,
        )
        measure(
            spark,
            "read + parse (source decodes) + cache + count + max(ts)",
            cached(parsed[True]),
            records,
            args.runs,
        )
        measure(spark, "land (Spark decodes)", land(parsed[False]), records, args.runs)
        measure(spark, "land (source decodes)", land(parsed[True]), records, args.runs)
    spark.stop()


if __name__ == "__main__":
    main()
