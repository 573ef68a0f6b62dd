"""No value can stop the query: every record lands in exactly one of telemetry_raw and
telemetry_quarantine, a bad one with a reason, and no string that lands holds invalid UTF-8.

Through the real path: embedded broker → ``kafka_py`` source with ``valueJsonSchema`` →
``parse_telemetry`` → ``BalancerSink`` landing into Delta tables on disk, read back with delta-rs.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable

from balancer import telemetry as tm
from balancer.config import load_config
from balancer.spark import job

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) // 60_000 * 60_000
GOOD = tm.partition_record(ts=NOW, cluster="prod-eu-1", broker=3, topic="orders", partition=7, leader=True,
                           replicas=[3, 1, 5], bytes_in=1e6, bytes_out=2e6, messages_in=5e3, size=1e9)
GOOD_BROKER = tm.broker_record(ts=NOW, cluster="prod-eu-1", broker=3, rack="eu-1a", network_in=1e8,
                               network_out=2e8, disk=1e12, cpu=0.4)


def encoded(record: dict, **changes) -> bytes:
    return tm.encode({**record, **changes})


def spliced(record: dict, field: str, raw: bytes) -> bytes:
    """``record`` encoded with the string ``field``'s contents replaced by ``raw`` bytes as they are."""
    marker = "\u0001MARK\u0001"
    return tm.encode({**record, field: marker}).replace(json.dumps(marker).encode()[1:-1], raw)


def produce_all(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> dict[int, tuple]:
    """Produce (key, value) pairs to partition 0; offset → the pair, from the broker's acknowledgements."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.max.bytes": 20_000_000,
                         "enable.idempotence": True})
    landed: dict[int, tuple] = {}

    def delivered(err, msg):
        assert err is None, err
        landed[msg.offset()] = (msg.key(), msg.value())

    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(landed) == len(records)
    return landed


def land(spark, broker, topic: str, tmp_path, *extra: str) -> tuple[pa.Table, pa.Table]:
    """Run the job once over the topic; telemetry_raw and telemetry_quarantine as delta-rs reads them."""
    config = load_config(None, [
        f"source.bootstrap_servers={broker.bootstrap_servers}", f"source.topic={topic}",
        f"lakehouse.path={tmp_path / 'lakehouse'}", "lakehouse.engine=delta-rs",
        f"checkpoint.path={tmp_path / 'checkpoints'}", "windows.size=5 minutes", "windows.slide=5 minutes",
        "windows.watermark=1 minute", "source.unavailable_timeout=20 seconds", "quality.enabled=false", *extra])
    queries = job.start(spark, config, once=True)
    job.run_until_idle(spark, queries)  # raises the query's failure
    root = tmp_path / "lakehouse"
    return (DeltaTable(str(root / "telemetry_raw")).to_pyarrow_table(),
            DeltaTable(str(root / "telemetry_quarantine")).to_pyarrow_table())


def assert_lands_exactly_once(sent: dict[int, tuple], raw: pa.Table, quarantine: pa.Table) -> dict[int, dict]:
    """Every offset in exactly one table, once; quarantined rows keep their bytes and have a reason.
    Returns the quarantined rows by offset."""
    raw_offsets = raw.column("kafka_offset").to_pylist()
    bad_offsets = quarantine.column("kafka_offset").to_pylist()
    assert len(raw_offsets) == len(set(raw_offsets)), "an offset landed twice in telemetry_raw"
    assert len(bad_offsets) == len(set(bad_offsets)), "an offset landed twice in telemetry_quarantine"
    assert not set(raw_offsets) & set(bad_offsets), "an offset landed in both tables"
    assert set(raw_offsets) | set(bad_offsets) == set(sent), "an offset landed in neither table"
    assert len(raw_offsets) + len(bad_offsets) == len(sent)
    # No string that landed holds invalid UTF-8 (Arrow's full validation checks every string's bytes).
    for table in (raw, quarantine):
        for name in table.column_names:
            if pa.types.is_string(table.schema.field(name).type):
                table.column(name).validate(full=True)
    rows = {r["kafka_offset"]: r for r in quarantine.to_pylist()}
    for offset, row in rows.items():
        assert row["reason"] and row["reason"].strip(), f"offset {offset}: no reason"
        assert row["value"] == sent[offset][1], f"offset {offset}: value not kept as it arrived"
        assert row["key"] == sent[offset][0], f"offset {offset}: key not kept as it arrived"
    return rows


UTF8 = "not valid UTF-8"  # the reason then names the offset of the first invalid byte, as Python finds it


def utf8_reason(value: bytes) -> str:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"value is not valid UTF-8 at byte offset {error.start}"
    raise AssertionError(f"{value[:40]!r} is valid UTF-8")


def test_poison_values_are_quarantined_and_the_stream_goes_on(spark, broker, tmp_path):
    topic = f"poison-{time.monotonic_ns()}"
    broker.create_topic(topic, partitions=1)
    cases = {
        "good": (b"prod-eu-1/3", encoded(GOOD), None),
        "good broker": (b"prod-eu-1/3", encoded(GOOD_BROKER), None),
        "binary reporter": (None, b"\xff\xfe\x00\x01\x02\x03binary\x00\x00", UTF8),
        "invalid UTF-8 in cluster": (None, spliced(GOOD, "cluster", b"prod-\xff-1"), UTF8),
        "invalid UTF-8 in topic": (None, spliced(GOOD, "topic", b"ord\xc3\x28ers"), UTF8),
        "invalid UTF-8 in rack": (None, spliced(GOOD_BROKER, "rack", b"eu-\xed\xa0\x80"), UTF8),
        "invalid UTF-8 in an unknown field": (None, spliced({**GOOD, "note": ""}, "note", b"\xfe"),
                                              UTF8),
        "all zero bytes": (None, bytes(4096), "not a JSON object"),
        "NUL bytes in JSON": (None, encoded(GOOD)[:20] + b"\x00\x00" + encoded(GOOD)[20:], "not a JSON object"),
        "binary garbage": (None, bytes(range(256)) * 4, UTF8),
        "U+FFFD before an invalid byte": (None, spliced(GOOD, "cluster", "\ufffd".encode() + b"\xff"), UTF8),
        "10 MB": (None, b'{"v":1,"pad":"' + b"x" * 10_000_000 + b'"}', "over source.max_value_bytes=65536"),
        "10 MB of invalid UTF-8": (None, b"\xff" * 10_000_000, "over source.max_value_bytes=65536"),
        "invalid UTF-8 key, good value": (b"\xff\xfe", encoded(GOOD), None),
        "invalid UTF-8 key, bad value": (b"\xff\xfe", b"\xc0", UTF8),
        "rate of 1e300 B/s": (None, encoded(GOOD, bytes_in=1e300), "field 'bytes_in' is 1.0E300 B/s, over source.max_rate=1e+13"),
        "bytes_out over max_rate": (None, encoded(GOOD, bytes_out=2e13), "field 'bytes_out' is 2.0E13 B/s"),
        "messages_in over max_rate": (None, encoded(GOOD, messages_in=1e14), "field 'messages_in' is 1.0E14"),
        "size over max_size": (None, encoded(GOOD, size=1e16), "field 'size' is 1.0E16 B, over source.max_size=1e+15"),
        "capacity over max_rate": (None, encoded({**GOOD_BROKER, "capacity": {**GOOD_BROKER["capacity"],
                                                                             "network_out": 1e20}}),
                                   "field 'capacity.network_out' is 1.0E20 B/s, over source.max_rate"),
        "rate at max_rate": (None, encoded(GOOD, bytes_in=1e13, size=1e15), None),
    }
    sent = produce_all(broker.bootstrap_servers, topic, [(k, v) for k, v, _ in cases.values()])
    raw, quarantine = land(spark, broker, topic, tmp_path)

    bad = assert_lands_exactly_once(sent, raw, quarantine)
    for offset, (case, (_, _, expected)) in enumerate(cases.items()):
        if expected is None:
            assert offset not in bad, f"{case}: quarantined: {bad[offset]['reason']}"
        else:
            assert offset in bad, f"{case}: not quarantined"
            if expected == UTF8:
                expected = utf8_reason(sent[offset][1])
            assert expected in bad[offset]["reason"], f"{case}: {bad[offset]['reason']}"
    # A readable preview beside the bytes: invalid sequences replaced, cut at source.max_value_bytes.
    assert bad[list(cases).index("binary reporter")]["value_text"].startswith("\ufffd\ufffd\x00\x01")
    assert len(bad[list(cases).index("10 MB")]["value_text"].encode()) == 65536
