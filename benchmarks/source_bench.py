"""Throughput of the kafka_py source vs a plain confluent-kafka consumer (the ceiling).

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/source_bench.py --messages 1000000

Produces N ~200-byte JSON telemetry messages to a 4-partition topic on the embedded broker,
then in the same process measures: (1) one plain Consumer reading everything, (2) our
source through Spark local[2], trigger(availableNow=True) into the noop sink.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

from balancer.embedded_broker import EmbeddedBroker  # noqa: E402


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    rng = random.Random(7)
    payloads = [json.dumps({"host": f"kafka-{rng.randrange(12):02d}.prod.example.internal", "broker": rng.randrange(12), "partition": rng.randrange(4096),
                            "topic": f"orders-{rng.randrange(40)}", "bytes_in": rng.random() * 1e6,
                            "bytes_out": rng.random() * 1e6, "msgs_in": rng.randrange(100000),
                            "ts": 1_700_000_000_000 + i}).encode() for i in range(1000)]
    size = sum(map(len, payloads)) / len(payloads)
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=payloads[i % 1000], key=b"%d" % (i % 4096), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return int(size)


def plain_consumer(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain", "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                         "queued.max.messages.kbytes": 65536})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, nbytes, eofs = 0, 0, set()
    started = time.perf_counter()
    while seen < n:
        for m in consumer.consume(num_messages=20_000, timeout=1.0):
            if m.error() is None:
                seen += 1
                nbytes += len(m.value())  # touch the payload, as any real reader does
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eofs.add(m.partition())
        if len(eofs) == partitions and seen < n:
            eofs.clear()  # EOF before the last batch arrived (HW quirk); keep going
    elapsed = time.perf_counter() - started
    consumer.close()
    assert seen == n, (seen, n)
    return n / elapsed


def source_in_process(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    """Our read path (consume + Arrow batches) without Spark: one range per partition, in turn."""
    from balancer.spark.kafka_source import KafkaInputPartition, _Options, read_range

    opts = _Options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
    per = {p: 0 for p in range(partitions)}
    for i in range(n):
        per[i % partitions] += 1
    started = time.perf_counter()
    rows = sum(batch.num_rows for p in range(partitions)
               for batch in read_range(opts, KafkaInputPartition(topic, p, 0, per[p])))
    assert rows == n, (rows, n)
    return n / (time.perf_counter() - started)


def spark_source(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    from balancer.spark.kafka_source import KafkaSource
    from balancer.spark.session import build_session

    spark = build_session(master="local[2]", app_name="source-bench", conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"})
    spark.dataSource.register(KafkaSource)
    rates = []
    for run in range(2):  # first run includes Python worker start-up; second is warm
        checkpoint = tempfile.mkdtemp(prefix="bench-ckpt-")
        started = time.perf_counter()
        query = (spark.readStream.format("kafka_py").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        elapsed = time.perf_counter() - started
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        assert rows == n, (rows, n)
        rates.append(n / elapsed)
    spark.stop()
    return rates[0], rates[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        topic = "telemetry-bench"
        broker.create_topic(topic, partitions=args.partitions)
        t0 = time.perf_counter()
        size = produce(broker.bootstrap_servers, topic, args.messages, args.partitions)
        print(f"produced {args.messages:,} msgs (~{size} B) to {args.partitions} partitions "
              f"in {time.perf_counter() - t0:.1f}s", flush=True)
        plain = plain_consumer(broker.bootstrap_servers, topic, args.messages, args.partitions)
        print(f"plain confluent-kafka consumer : {plain:>12,.0f} msgs/s (ceiling)", flush=True)
        own = source_in_process(broker.bootstrap_servers, topic, args.messages, args.partitions)
        print(f"kafka_py read path, no Spark   : {own:>12,.0f} msgs/s ({own / plain:.0%} of ceiling)", flush=True)
        cold, warm = spark_source(broker.bootstrap_servers, topic, args.messages)
        print(f"kafka_py via Spark local[2]    : {cold:>12,.0f} msgs/s cold (incl. query start-up), "
              f"{warm:>12,.0f} msgs/s warm  ({warm / plain:.0%} of ceiling)", flush=True)


if __name__ == "__main__":
    main()
