"""Throughput and CPU cost of the kafka_py source vs a plain confluent-kafka consumer (the ceiling).

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/source_bench.py --messages 1000000 \\
        [--baseline GIT_REV]

Produces N ~200-byte JSON telemetry messages to a 4-partition topic on the embedded broker,
then in the same process measures: (1) one plain Consumer reading everything, (2) our read
path (``read_range``) without Spark, (3) our source through Spark local[2],
trigger(availableNow=True) into the noop sink. With ``--baseline REV`` the source as it was at
that git revision runs (2) and (3) too, alternating with the current one, so both see the
same machine load.

Next to msgs/s (wall clock, swings with load on a shared box) each line gives CPU µs per
message of everything but the broker (this process, the Spark JVM and its Python workers)
and of the broker: CPU per message is what the source costs, whatever else runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from confluent_kafka import Producer
from ingest_bench import plain_consumer

from balancer.demo.embedded_broker import EmbeddedBroker

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds incl. reaped children) of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK


def tree_cpu(root: int, exclude: int) -> float:
    """CPU seconds of ``root`` and all its descendants, except the ``exclude`` subtree."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None:
            stats[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid == exclude or pid not in stats:
            continue
        total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


class Meter:
    """Wall time and CPU (ours vs the broker's) of one measured run."""

    def __init__(self, broker_pid: int):
        self.broker_pid = broker_pid

    def __enter__(self):
        self.t0, self.ours0, self.broker0 = (
            time.perf_counter(),
            tree_cpu(os.getpid(), self.broker_pid),
            _stat(self.broker_pid)[1],
        )
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        self.ours = tree_cpu(os.getpid(), self.broker_pid) - self.ours0
        self.broker = _stat(self.broker_pid)[1] - self.broker0
        self.load = os.getloadavg()[0]

    def report(self, label: str, n: int) -> float:
        rate = n / self.wall
        print(
            f"{label:<40} {rate:>10,.0f} msgs/s   CPU {1e6 * self.ours / n:5.2f} µs/msg ours, "
            f"{1e6 * self.broker / n:5.2f} broker   load {self.load:.1f}",
            flush=True,
        )
        return rate


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    rng = random.Random(7)
    payloads = [
        json.dumps(
            {
                "host": f"kafka-{rng.randrange(12):02d}.prod.example.internal",
                "broker": rng.randrange(12),
                "partition": rng.randrange(4096),
                "topic": f"orders-{rng.randrange(40)}",
                "bytes_in": rng.random() * 1e6,
                "bytes_out": rng.random() * 1e6,
                "msgs_in": rng.randrange(100000),
                "ts": 1_700_000_000_000 + i,
            }
        ).encode()
        for i in range(1000)
    ]
    size = sum(map(len, payloads)) / len(payloads)
    for i in range(n):
        while True:
            try:
                producer.produce(
                    topic, value=payloads[i % 1000], key=b"%d" % (i % 4096), partition=i % partitions
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return int(size)


def load_source(rev: str | None):
    """The Kafka connector: the current package, or its module at git revision ``rev`` (pickled by value
    so Spark's Python workers get that code, not the installed one)."""
    if rev is None:
        from balancer.spark.ingest import kafka

        return kafka
    from pyspark import cloudpickle

    code = subprocess.run(
        ["git", "show", f"{rev}:balancer/spark/kafka_source.py"],
        check=True,
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    ).stdout
    name = "kafka_source_baseline"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(code, f"{rev}:kafka_source.py", "exec"), module.__dict__)
    cloudpickle.register_pickle_by_value(module)
    return module


def source_in_process(module, bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """Our read path (consume + Arrow batches) without Spark: one range per partition, in turn."""
    # A revision's module from git (before the connector became a package) names its options _Options.
    options = getattr(module, "KafkaOptions", None) or module._Options
    opts = options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
    per = {p: 0 for p in range(partitions)}
    for i in range(n):
        per[i % partitions] += 1
    rows = sum(
        batch.num_rows
        for p in range(partitions)
        for batch in module.read_range(opts, module.KafkaInputPartition(topic, p, 0, per[p]))
    )
    assert rows == n, (rows, n)


def spark_run(spark, fmt: str, bootstrap: str, topic: str, n: int) -> None:
    checkpoint = tempfile.mkdtemp(prefix="bench-ckpt-")
    query = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows == n, (rows, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--baseline", metavar="GIT_REV", help="also run the source as it was at this revision"
    )
    parser.add_argument("--rounds", type=int, default=2, help="measured runs per variant, alternating")
    args = parser.parse_args()
    import numpy  # noqa: F401  imported up front, not inside the first measured run
    import pyarrow  # noqa: F401

    variants = {"current": load_source(None)}
    if args.baseline:
        variants[f"baseline {args.baseline}"] = load_source(args.baseline)
    with EmbeddedBroker() as broker:
        topic, n, bootstrap = "telemetry-bench", args.messages, broker.bootstrap_servers
        broker.create_topic(topic, partitions=args.partitions)
        t0 = time.perf_counter()
        size = produce(bootstrap, topic, n, args.partitions)
        print(
            f"produced {n:,} msgs (~{size} B) to {args.partitions} partitions "
            f"in {time.perf_counter() - t0:.1f}s",
            flush=True,
        )
        meter = Meter(broker.pid)
        for _ in range(args.rounds):
            with meter:
                plain_consumer(bootstrap, topic, args.partitions, n)
            meter.report("plain confluent-kafka consumer (ceiling)", n)
            for label, module in variants.items():
                with meter:
                    source_in_process(module, bootstrap, topic, n, args.partitions)
                meter.report(f"read_range, no Spark [{label}]", n)

        from balancer.spark.session import build_session

        spark = build_session(
            master="local[2]",
            app_name="source-bench",
            conf={
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.driver.memory": "4g",
            },
        )
        formats = {}
        for index, (label, module) in enumerate(variants.items()):
            source = type(
                f"Bench{index}",
                (module.KafkaSource,),
                {"name": classmethod(lambda cls, i=index: f"kafka_py_bench{i}")},
            )
            spark.dataSource.register(source)
            formats[label] = source.name()
            with meter:  # includes Spark's and the Python workers' start-up: not comparable
                spark_run(spark, formats[label], bootstrap, topic, n)
            meter.report(f"Spark local[2] first run [{label}]", n)
        for _ in range(args.rounds):
            for label, fmt in formats.items():
                with meter:
                    spark_run(spark, fmt, bootstrap, topic, n)
                meter.report(f"Spark local[2] warm [{label}]", n)
        spark.stop()


if __name__ == "__main__":
    main()
