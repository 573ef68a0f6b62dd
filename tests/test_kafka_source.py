"""kafka_py source against real Spark (local[2]) and the real embedded broker; no mocks."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException

from balancer.demo.embedded_broker import EmbeddedBroker
from balancer.demo.ports import free_port
from balancer.spark.ingest.kafka import SCHEMA, KafkaSource


@pytest.fixture(scope="module")
def kspark(spark):
    spark.dataSource.register(KafkaSource)
    return spark


@pytest.fixture
def own_broker():
    """A private broker: these tests restart it, which wipes every topic on it."""
    with EmbeddedBroker() as running:
        yield running


def produce(
    bootstrap: str, topic: str, count: int, *, partitions: int = 2, tag: str = "a", batches: int = 2
) -> set[tuple[int, bytes]]:
    """``count`` records round-robin over partitions, flushed in ``batches`` separate producer
    batches so the last one exercises the broker's base-offset high-watermark quirk."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    sent = set()
    per_batch = max(1, count // batches)
    for i in range(count):
        value = f"{tag}-{i}".encode()
        producer.produce(topic, key=str(i).encode(), value=value, partition=i % partitions)
        sent.add((i % partitions, value))
        if (i + 1) % per_batch == 0:
            assert producer.flush(10) == 0
    assert producer.flush(10) == 0
    return sent


def reader(spark, bootstrap: str, topic: str, **options):
    stream = (
        spark.readStream.format("kafka_py")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafkaUnavailableTimeoutMs", "5000")
    )
    for key, value in options.items():
        stream = stream.option(key, str(value))
    return stream.load()


def run_available_now(spark, bootstrap, topic, workdir, **options):
    query = (
        reader(spark, bootstrap, topic, **options)
        .writeStream.format("parquet")
        .option("path", str(workdir / "out"))
        .option("checkpointLocation", str(workdir / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "availableNow query did not finish"
    return query


def output(spark, workdir) -> list:
    return spark.read.parquet(str(workdir / "out")).select("partition", "offset", "value").collect()


def as_set(rows) -> set[tuple[int, bytes]]:
    return {(r["partition"], bytes(r["value"])) for r in rows}


@pytest.mark.integration
def test_exact_records_then_only_new_ones_on_rerun(kspark, broker, topic, workdir):
    sent = produce(broker.bootstrap_servers, topic, 1000, batches=3)
    run_available_now(kspark, broker.bootstrap_servers, topic, workdir, startingOffsets="earliest")
    rows = output(kspark, workdir)
    assert len(rows) == 1000 and as_set(rows) == sent  # includes the last producer batch
    assert sorted(r["offset"] for r in rows if r["partition"] == 0) == list(range(500))

    schema = kspark.read.parquet(str(workdir / "out")).schema.simpleString()
    assert schema == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )

    more = produce(broker.bootstrap_servers, topic, 37, tag="b")
    run_available_now(kspark, broker.bootstrap_servers, topic, workdir, startingOffsets="earliest")
    rows = output(kspark, workdir)
    assert len(rows) == 1037 and as_set(rows) == sent | more  # no duplicates, no loss


@pytest.mark.integration
def test_batch_read_with_ending_offsets(kspark, broker, topic):
    sent = produce(broker.bootstrap_servers, topic, 20)
    base = (
        kspark.read.format("kafka_py")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )
    assert as_set(base.load().collect()) == sent
    ending = base.option("endingOffsets", json.dumps({topic: {"0": 3, "1": -1}})).load().collect()
    assert sorted((r["partition"], r["offset"]) for r in ending) == [(0, 0), (0, 1), (0, 2)] + [
        (1, o) for o in range(10)
    ]


@pytest.mark.integration
def test_max_offsets_per_trigger_caps_each_batch(kspark, broker, topic, workdir):
    sent = produce(broker.bootstrap_servers, topic, 100)
    query = (
        reader(kspark, broker.bootstrap_servers, topic, startingOffsets="earliest", maxOffsetsPerTrigger=30)
        .writeStream.format("memory")
        .queryName(f"capped_{uuid.uuid4().hex[:8]}")
        .option("checkpointLocation", str(workdir / "ckpt"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        query.processAllAvailable()
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        rows = kspark.sql(f"select partition, value from {query.name}").collect()
    finally:
        query.stop()
    assert sizes == [30, 30, 30, 10]
    assert as_set(rows) == sent and len(rows) == 100


@pytest.mark.integration
def test_starting_offsets_latest_skips_existing_records(kspark, broker, topic, workdir):
    produce(broker.bootstrap_servers, topic, 10, tag="old")
    query = (
        reader(kspark, broker.bootstrap_servers, topic, startingOffsets="latest")
        .writeStream.format("memory")
        .queryName(f"latest_{uuid.uuid4().hex[:8]}")
        .option("checkpointLocation", str(workdir / "ckpt"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        query.processAllAvailable()  # initial offset resolved before producing more
        new = produce(broker.bootstrap_servers, topic, 7, tag="new")
        query.processAllAvailable()
        rows = kspark.sql(f"select partition, value from {query.name}").collect()
    finally:
        query.stop()
    assert as_set(rows) == new and len(rows) == 7


@pytest.mark.integration
def test_unreachable_brokers_fail_in_bounded_time_without_leaking_secrets(kspark, workdir, capfd):
    bootstrap = f"127.0.0.1:{free_port()}"
    secret = f"pw-{uuid.uuid4().hex}"
    started = time.monotonic()
    query = (
        reader(
            kspark,
            bootstrap,
            "nowhere",
            kafkaUnavailableTimeoutMs=2000,
            **{
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.username": "svc",
                "kafka.sasl.password": secret,
            },
        )
        .writeStream.format("noop")
        .option("checkpointLocation", str(workdir / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException) as failure:
        query.awaitTermination(60)
    assert time.monotonic() - started < 45
    message = str(failure.value)
    assert bootstrap in message and "unavailable" in message
    captured = capfd.readouterr()
    assert secret not in message and secret not in captured.out and secret not in captured.err


@pytest.mark.integration
def test_broker_restart_is_reported_as_data_loss(kspark, own_broker, workdir):
    topic = f"lossy-{uuid.uuid4().hex[:8]}"
    own_broker.create_topic(topic, partitions=2)
    produce(own_broker.bootstrap_servers, topic, 40)
    run_available_now(kspark, own_broker.bootstrap_servers, topic, workdir, startingOffsets="earliest")
    assert len(output(kspark, workdir)) == 40

    own_broker.restart()  # memory storage: all records gone, offsets restart at 0
    own_broker.create_topic(topic, partitions=2)
    after = produce(own_broker.bootstrap_servers, topic, 6, tag="after")

    with pytest.raises(StreamingQueryException) as failure:
        run_available_now(kspark, own_broker.bootstrap_servers, topic, workdir, startingOffsets="earliest")
    message = str(failure.value)
    assert "Data loss" in message and repr(topic) in message and "expected offset 20" in message
    assert "found latest offset 3" in message

    # failOnDataLoss=false: warn and continue from what exists.
    run_available_now(
        kspark,
        own_broker.bootstrap_servers,
        topic,
        workdir,
        startingOffsets="earliest",
        failOnDataLoss="false",
    )
    rows = output(kspark, workdir)
    assert len(rows) == 46 and after <= as_set(rows)


@pytest.mark.integration
def test_read_fails_fast_when_records_in_range_are_missing(kspark, broker, topic):
    sent = produce(broker.bootstrap_servers, topic, 20)
    beyond = (
        kspark.read.format("kafka_py")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("endingOffsets", json.dumps({topic: {"0": 50, "1": 10}}))
    )
    started = time.monotonic()
    with pytest.raises(Exception) as failure:
        beyond.load().collect()
    assert time.monotonic() - started < 30  # an EOF at offset 10 ends the wait, no timeout needed
    assert "Data loss" in str(failure.value) and "expected offset 50" in str(failure.value)
    assert as_set(beyond.option("failOnDataLoss", "false").load().collect()) == sent


def test_arrow_batch_matches_messages_field_by_field():
    """The bulk column builder: keys absent/mixed, missing timestamps, given or read offsets."""
    from datetime import datetime, timedelta

    from confluent_kafka import Message

    from balancer.spark.ingest.kafka.reader import to_batch

    epoch = datetime(1970, 1, 1, tzinfo=UTC)

    def msg(offset, key, ts):
        return Message(
            topic="metrics", partition=3, offset=offset, key=key, value=b"v%d" % offset, timestamp=ts
        )

    mixed = [
        msg(10, b"k", (1, 1_790_000_000_123)),
        msg(11, None, (0, -1)),
        msg(12, b"", (2, 1_790_000_000_456)),
    ]
    expected = [
        (b"k", b"v10", "metrics", 3, 10, 1_790_000_000_123_000, 0),
        (None, b"v11", "metrics", 3, 11, None, -1),
        (b"", b"v12", "metrics", 3, 12, 1_790_000_000_456_000, 1),
    ]
    for batch in (to_batch("metrics", 3, mixed), to_batch("metrics", 3, mixed, first_offset=10)):
        assert batch.schema.names == SCHEMA.fieldNames()
        rows = [tuple(r.values()) for r in batch.to_pylist()]
        as_micros = [
            (k, v, t, p, o, None if ts is None else (ts - epoch) // timedelta(microseconds=1), tt)
            for k, v, t, p, o, ts, tt in rows
        ]
        assert as_micros == expected

    keyless = to_batch("metrics", 0, [msg(o, None, (1, 1_790_000_000_000)) for o in range(5)], first_offset=0)
    assert keyless.column("key").null_count == 5 and keyless.column("offset").to_pylist() == list(range(5))
    assert keyless.column("timestamp").null_count == 0


@pytest.mark.integration
def test_a_decoder_handed_in_decodes_values_in_the_reading_task(kspark, broker, topic):
    """``KafkaSource.decoding(JsonValues(schema))`` adds ``value_json``.

    Decoded where the reader is sure, NULL (left to Spark) elsewhere."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from balancer.spark.ingest.decoders import JsonValues

    schema = StructType([StructField("n", IntegerType()), StructField("name", StringType())])
    values = [b'{"n":1,"name":"a"}', b"not json", b'{"n":"two"}', b'{"n":3,"extra":[1,2]}']
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(10) == 0
    source = KafkaSource.decoding(JsonValues(schema))
    kspark.dataSource.register(source)
    assert source.name() == "kafka_py_value_json"
    frame = (
        kspark.read.format(source.name())
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    assert frame.schema.names[:7] == SCHEMA.names
    assert frame.schema["value_json"].dataType == schema
    rows = {r["value"]: r["value_json"] for r in frame.collect()}
    assert rows == {values[0]: (1, "a"), values[1]: None, values[2]: None, values[3]: (3, None)}

    with pytest.raises(TypeError, match="schema must be a Spark StructType"):
        JsonValues("{not a schema")
    with pytest.raises(TypeError, match=r"decoder must be a ValueDecoder"):
        KafkaSource.decoding(object())
    with pytest.raises(ValueError, match=r"decoder\.column must not be one of Kafka's columns"):
        KafkaSource.decoding(JsonValues(schema, column="value"))
