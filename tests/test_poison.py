"""No value can stop the query: every record lands in exactly one of telemetry_raw and
telemetry_quarantine, a bad one with a reason, and no string that lands holds invalid UTF-8.

Through the real path: three real Apache Kafka brokers → ``kafka_py`` source decoding JSON (``JsonValues``) →
``parse_telemetry`` → ``BalancerSink`` landing into Delta tables on disk, read back with delta-rs.
"""

from __future__ import annotations

import json
import math
import random
import re
import struct
import time

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable
from test_parse import GOOD, GOOD_BROKER, NOW

from balancer import telemetry as tm
from balancer.config import load_config
from balancer.spark import job

pytestmark = pytest.mark.integration


# The oversized values (past source.max_value_bytes) must reach the topic: Kafka's default limit is 1 MB.
LARGE_VALUES = {"max.message.bytes": "20000000"}


@pytest.fixture
def broker(kafka):
    """This module runs on the three real Apache Kafka brokers (the session's ``kafka`` fixture), in place
    of the embedded one: ``topic`` and the tests below get them through this name."""
    return kafka


def encoded(record: dict, **changes) -> bytes:
    return tm.encode({**record, **changes})


def spliced(record: dict, field: str, raw: bytes) -> bytes:
    """``record`` encoded with the string ``field``'s contents replaced by ``raw`` bytes as they are."""
    marker = "\u0001MARK\u0001"
    return tm.encode({**record, field: marker}).replace(json.dumps(marker).encode()[1:-1], raw)


def produce_all(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]
) -> dict[int, tuple]:
    """Produce (key, value) pairs to partition 0; offset → the pair, from the broker's acknowledgements."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "message.max.bytes": 20_000_000,
            "enable.idempotence": True,
        }
    )
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
    """Run the job once over the topic (the data contract on, as by default: it reads the quarantined
    records too); telemetry_raw and telemetry_quarantine as delta-rs reads them."""
    config = load_config(
        None,
        [
            f"source.bootstrap_servers={broker.bootstrap_servers}",
            f"source.topic={topic}",
            f"lakehouse.path={tmp_path / 'lakehouse'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={tmp_path / 'checkpoints'}",
            "windows.size=5 minutes",
            "windows.slide=5 minutes",
            "windows.watermark=1 minute",
            "source.unavailable_timeout=20 seconds",
            *extra,
        ],
    )
    queries = job.start(spark, config, once=True)
    job.run_until_idle(spark, queries)  # raises the query's failure
    root = tmp_path / "lakehouse"
    return (
        DeltaTable(str(root / "telemetry_raw")).to_pyarrow_table(),
        DeltaTable(str(root / "telemetry_quarantine")).to_pyarrow_table(),
    )


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
    broker.create_topic(topic, partitions=1, config=LARGE_VALUES)
    cases = {
        "good": (b"prod-eu-1/3", encoded(GOOD), None),
        "good broker": (b"prod-eu-1/3", encoded(GOOD_BROKER), None),
        "binary reporter": (None, b"\xff\xfe\x00\x01\x02\x03binary\x00\x00", UTF8),
        "invalid UTF-8 in cluster": (None, spliced(GOOD, "cluster", b"prod-\xff-1"), UTF8),
        "invalid UTF-8 in topic": (None, spliced(GOOD, "topic", b"ord\xc3\x28ers"), UTF8),
        "invalid UTF-8 in rack": (None, spliced(GOOD_BROKER, "rack", b"eu-\xed\xa0\x80"), UTF8),
        "invalid UTF-8 in an unknown field": (None, spliced({**GOOD, "note": ""}, "note", b"\xfe"), UTF8),
        "all zero bytes": (None, bytes(4096), "not a JSON object"),
        "NUL bytes in JSON": (
            None,
            encoded(GOOD)[:20] + b"\x00\x00" + encoded(GOOD)[20:],
            "not a JSON object",
        ),
        "binary garbage": (None, bytes(range(256)) * 4, UTF8),
        "U+FFFD before an invalid byte": (None, spliced(GOOD, "cluster", "\ufffd".encode() + b"\xff"), UTF8),
        "10 MB": (None, b'{"v":1,"pad":"' + b"x" * 10_000_000 + b'"}', "over source.max_value_bytes=65536"),
        "10 MB of invalid UTF-8": (None, b"\xff" * 10_000_000, "over source.max_value_bytes=65536"),
        "invalid UTF-8 key, good value": (b"\xff\xfe", encoded(GOOD), None),
        "invalid UTF-8 key, bad value": (b"\xff\xfe", b"\xc0", UTF8),
        "rate of 1e300 B/s": (
            None,
            encoded(GOOD, bytes_in=1e300),
            "field 'bytes_in' is 1.0E300 B/s, over source.max_rate=1e+13",
        ),
        "bytes_out over max_rate": (None, encoded(GOOD, bytes_out=2e13), "field 'bytes_out' is 2.0E13 B/s"),
        "messages_in over max_rate": (None, encoded(GOOD, messages_in=1e14), "field 'messages_in' is 1.0E14"),
        "size over max_size": (
            None,
            encoded(GOOD, size=1e16),
            "field 'size' is 1.0E16 B, over source.max_size=1e+15",
        ),
        "capacity over max_rate": (
            None,
            encoded({**GOOD_BROKER, "capacity": {**GOOD_BROKER["capacity"], "network_out": 1e20}}),
            "field 'capacity.network_out' is 1.0E20 B/s, over source.max_rate",
        ),
        "rate at max_rate": (None, encoded(GOOD, bytes_in=1e13, size=1e15), None),
        # Event times no datetime holds: quarantined, and left out of the data contract's event-time span.
        "ts of the year 287,000": (None, encoded(GOOD, ts=9_000_000_000_000_000), "not a plausible epoch"),
        "ts at the long's limit": (None, encoded(GOOD, ts=-(2**63)), "not a plausible epoch"),
        "cut value naming an absurd ts": (
            None,
            b'{"cluster":"c9","ts":-9223372036854775808,"v"',
            "not a JSON object",
        ),
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


# -- property-based fuzzing through the real landing pass ------------------------------------------------

# One landing costs tens of seconds, so it cannot run per Hypothesis example: Hypothesis draws the values
# (its generator, with its bias to edge cases), and all of them go through ONE landing, the property
# checked record by record. A failure names the offending values; there is no shrinking.
FUZZ_EXAMPLES = 1000  # of 8 values each; Hypothesis repeats many, about 2200 distinct values are left
HUGE = (1e300, 1.8e308, 2.0**63, 1.0000001e13, 1e14, 2e15, 1e20)
# Integers past int32, int64 or a timestamp's microseconds, for the integer fields (ts, broker, partition).
HUGE_INTEGERS = (2**31, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), 2**64, 9_223_372_036_854_776)
BAD_NUMBERS = (float("nan"), float("inf"), float("-inf"), -1.0, -1e-300, -1e300) + HUGE + HUGE_INTEGERS
NOT_UTF8 = (b"\xff", b"\xfe\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80")


class WireFormat:
    """What the fuzz test needs of a telemetry format: its config, how to make valid values, and which
    fields to spoil. Another format is another instance (and a parameter of the test)."""

    def __init__(
        self,
        name: str,
        config: tuple[str, ...],
        record,
        encode,
        string_fields,
        number_fields,
        problem,
        splice=None,
        text_record=None,
    ):
        self.name, self.config, self.record, self.encode = name, config, record, encode
        self.problem = problem  # (value, now_ms) -> why the value is bad, or None: the test's oracle
        self.string_fields, self.number_fields = string_fields, number_fields
        self.splice = (
            splice or spliced
        )  # (record, field, raw bytes) -> the value with the field's text replaced
        self.text_record = text_record or record  # records that hold a string field to spoil


def _v1_records():
    from hypothesis import strategies as st

    rate = st.floats(min_value=0, max_value=1e12, allow_nan=False)
    common = {
        "ts": st.integers(NOW - 240_000, NOW),
        "cluster": st.sampled_from(["prod-eu-1", "c2", "é-ü"]),
        "broker": st.integers(0, 5),
    }
    partition = st.builds(
        lambda broker, others, **kw: tm.partition_record(broker=broker, replicas=[broker, *others], **kw),
        others=st.lists(st.integers(6, 9), max_size=2, unique=True),
        topic=st.sampled_from(["orders", "a.b_c-1", "t" * 249]),
        partition=st.integers(0, 50),
        leader=st.booleans(),
        bytes_in=rate,
        bytes_out=rate,
        messages_in=rate,
        size=rate,
        **common,
    )
    broker = st.builds(
        tm.broker_record,
        rack=st.none() | st.sampled_from(["eu-1a", "rack ü"]),
        network_in=st.floats(1, 1e10),
        network_out=st.floats(1, 1e10),
        disk=st.floats(1, 1e14),
        cpu=st.none() | st.floats(0, 1),
        **common,
    )
    return partition | broker


INT32 = (-(2**31), 2**31 - 1)
V1_LIMITS = {"bytes_in": "max_rate", "bytes_out": "max_rate", "messages_in": "max_rate", "size": "max_size"}
INT64 = (-(2**63), 2**63 - 1)


def _integer(x, bounds) -> bool:
    return type(x) is int and bounds[0] <= x <= bounds[1]


def _finite(x) -> float | None:
    """``x`` as a finite float if it is a JSON number that is one, else None."""
    if type(x) not in (int, float):
        return None
    try:
        number = float(x)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# RFC 8259's whitespace; str.strip() would also take form feeds, vertical tabs and Unicode spaces.
JSON_WHITESPACE = " \t\n\r"


def v1_problem(value: bytes, now_ms: int) -> str | None:  # noqa: C901 - one `if` per rule of the format
    """Why ``value`` breaks telemetry format v1 (``balancer/telemetry.py``'s spec and the limits of
    conf/balancer.yaml's source section), or None: the fuzz test's independent oracle, in Python. It may
    be stricter than the job (bytes after the JSON object, a number where a string belongs), never more
    lenient: whatever it passes, the job must land."""
    if not value or len(value) > 65536:
        return "empty or too long"
    try:
        text = value.decode("utf-8")
        record, end = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip(JSON_WHITESPACE)))
    except (UnicodeDecodeError, ValueError):
        return "not UTF-8 JSON"
    if text[end:].strip(JSON_WHITESPACE) or not isinstance(record, dict):
        return "not one JSON object"
    kind = record.get("type")
    if record.get("v") != 1 or type(record.get("v")) is not int or kind not in tm.RECORD_TYPES:
        return "version or type"
    limits = {"max_rate": 1e13, "max_size": 1e15}
    for field in tm.FIELDS:
        x = record.get(field.name)
        if x is None:
            if kind in field.required_for:
                return f"missing {field.name}"
            continue
        if field.type == "string" and not isinstance(x, str):
            return f"{field.name} not a string"
        if field.type in ("int", "long") and not _integer(x, INT32 if field.type == "int" else INT64):
            return f"{field.name} not an integer"
        if field.type == "bool" and type(x) is not bool:
            return f"{field.name} not a boolean"
        if field.type == "int_array" and not (
            isinstance(x, list)
            and x
            and all(_integer(r, INT32) and r >= 0 for r in x)
            and len(set(x)) == len(x)
        ):
            return f"{field.name} not distinct broker ids"
        if field.type == "double" and _finite(x) is None:
            return f"{field.name} not a finite number"
        if field.type == "capacity":
            if not isinstance(x, dict):
                return "capacity not an object"
            for key in tm.CAPACITY_KEYS:
                number = _finite(x.get(key))
                if number is None or not 0 < number <= limits["max_size" if key == "disk" else "max_rate"]:
                    return f"capacity.{key} out of range"
        if field.non_negative and x < 0:
            return f"{field.name} negative"
        most = {
            "bytes_in": "max_rate",
            "bytes_out": "max_rate",
            "messages_in": "max_rate",
            "size": "max_size",
        }
        if field.name in most and x > limits[most[field.name]]:
            return f"{field.name} over its limit"
    if not tm.MIN_TS_MS <= record["ts"] <= now_ms + tm.MAX_CLOCK_SKEW_MS:
        return "ts implausible"
    if not record["cluster"].strip():
        return "cluster empty"
    if kind == "partition":
        if not re.search(tm.TOPIC_NAME_PATTERN, record["topic"]):
            return "topic name"
        if record["broker"] not in record["replicas"]:
            return "broker not among replicas"
    return None


V1 = WireFormat(
    "v1",
    (),
    _v1_records,
    tm.encode,
    ("cluster", "topic", "rack", "type"),
    ("bytes_in", "bytes_out", "messages_in", "size", "cpu", "broker", "partition", "ts"),
    v1_problem,
)
FORMATS = {"v1": V1}


def fuzz_values(fmt: WireFormat):
    """(kind, value) pairs: random bytes, valid values with bytes flipped, cut or appended, valid records
    with a number spoiled or a string holding invalid UTF-8, and valid values as they are."""
    from hypothesis import strategies as st

    valid = fmt.record().map(fmt.encode)

    def flipped(args):
        value, at, mask = args
        at %= len(value)
        return value[:at] + bytes([value[at] ^ mask]) + value[at + 1 :]

    def seeded_bytes(args):
        seed, size = args
        return random.Random(seed).randbytes(size)

    def sum_bytes(args):
        return args[0] + args[1]

    def spoiled_number(args):
        record, field, number = args
        return fmt.encode({**record, field: number})

    def spoiled_text(args):
        record, field, raw = args
        present = [f for f in fmt.string_fields if isinstance(record.get(f), str)]
        return fmt.splice(record, present[field % len(present)], raw)

    # One value of each kind per example, so every kind is well represented.
    return st.tuples(
        st.tuples(st.just("random"), st.binary(max_size=300)),
        st.tuples(st.just("random"), st.tuples(st.integers(0, 2**63), st.integers(0, 400)).map(seeded_bytes)),
        st.tuples(
            st.just("flipped"), st.tuples(valid, st.integers(0, 10_000), st.integers(1, 255)).map(flipped)
        ),
        st.tuples(
            st.just("cut"), st.tuples(valid, st.integers(0, 10_000)).map(lambda a: a[0][: a[1] % len(a[0])])
        ),
        st.tuples(st.just("appended"), st.tuples(valid, st.binary(min_size=1, max_size=20)).map(sum_bytes)),
        st.tuples(
            st.just("bad number"),
            st.tuples(fmt.record(), st.sampled_from(fmt.number_fields), st.sampled_from(BAD_NUMBERS)).map(
                spoiled_number
            ),
        ),
        st.tuples(
            st.just("not UTF-8"),
            st.tuples(fmt.text_record(), st.integers(0, 3), st.sampled_from(NOT_UTF8)).map(spoiled_text),
        ),
        st.tuples(st.just("valid"), valid),
    )


def draw(strategy, count: int) -> list:
    """``count`` examples of ``strategy`` (each a tuple of values), flattened."""
    from hypothesis import HealthCheck, Phase, given, settings

    drawn = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example):
        drawn.append(example)

    collect()
    return [value for example in drawn for value in example]


@pytest.mark.parametrize("name", list(FORMATS))
def test_fuzzed_values_each_land_in_exactly_one_table(spark, broker, tmp_path, name):
    fmt = FORMATS[name]
    values = list({value: (kind, value) for kind, value in draw(fuzz_values(fmt), FUZZ_EXAMPLES)}.values())
    assert len(values) >= 2000
    kinds = {}
    for kind, _ in values:
        kinds[kind] = kinds.get(kind, 0) + 1
    assert len(kinds) == 7, kinds  # 'random' twice
    topic = f"fuzz-{name}-{time.monotonic_ns()}"
    broker.create_topic(topic, partitions=1, config=LARGE_VALUES)
    # Keys are kept as they arrived too, whatever they hold: every third one is not UTF-8.
    sent = produce_all(
        broker.bootstrap_servers,
        topic,
        [(None if i % 3 else bytes([i % 256, 0xFF]), v) for i, (_, v) in enumerate(values)],
    )
    kind_of = {offset: kind for offset, (kind, _) in enumerate(values)}

    now_ms = int(time.time() * 1000)  # the job's clock reads later: a stricter oracle, never more lenient
    raw, quarantine = land(spark, broker, topic, tmp_path, *fmt.config)  # raises if the query stopped

    bad = assert_lands_exactly_once(sent, raw, quarantine)
    landed = {r["kafka_offset"]: r for r in raw.to_pylist()}
    for offset, (_, value) in sent.items():
        where = f"offset {offset} ({kind_of[offset]}) {value[:120]!r}"
        if kind_of[offset] == "valid":
            assert offset in landed, f"{where}: a valid record was quarantined: {bad[offset]['reason']}"
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError as error:
            assert offset in bad, where
            assert bad[offset]["reason"] == f"value is not valid UTF-8 at byte offset {error.start}", where
            continue
        if offset in bad:
            problem = fmt.problem(value, now_ms)
            assert problem is not None, f"{where}: quarantined ({bad[offset]['reason']}) but valid v1"
        if offset in landed:
            # What landed is what the value says, read independently by Python's own JSON parser. Like
            # Spark's from_json, it takes the value's first JSON value: bytes after it are not looked at.
            try:
                record, _ = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
            except ValueError as error:
                raise AssertionError(f"{where}: landed, but Python reads no JSON in it: {error}") from None
            row = landed[offset]
            assert (
                record["v"] == 1 and row["type"] == record["type"] and row["cluster"] == record["cluster"]
            ), where
            assert row["broker"] == record["broker"] and row["ts"].timestamp() * 1000 == record["ts"], where
            for field, most in (
                ("bytes_in", 1e13),
                ("bytes_out", 1e13),
                ("messages_in", 1e13),
                ("size", 1e15),
            ):
                assert row[field] == record.get(field), where
                assert row[field] is None or 0 <= row[field] <= most, where


# -- Cruise Control's reporter format ---------------------------------------------------------------------


def _cc_encode(record: dict) -> bytes:
    """MetricSerde's layout written with struct, independently of balancer.cruise_control's encoder."""
    head = struct.pack(">bbbqi", record["class"], 0, record["type"], record["ts"], record["broker"])
    if record["class"] == 0:
        return head + struct.pack(">d", record["value"])
    topic = record["topic"] if isinstance(record["topic"], bytes) else record["topic"].encode()
    body = struct.pack(">i", len(topic)) + topic
    if record["class"] == 2:
        body += struct.pack(">i", record["partition"])
    return head + body + struct.pack(">d", record["value"])


def _cc_records():
    from hypothesis import strategies as st

    common = {
        "ts": st.integers(NOW - 240_000, NOW),
        "broker": st.integers(0, 5),
        "value": st.floats(min_value=0, max_value=1e12, allow_nan=False),
    }
    topic = st.sampled_from(["orders", "a_b-1", "t" * 249])
    broker = st.fixed_dictionaries({"class": st.just(0), "type": st.sampled_from([0, 1, 5, 7, 19]), **common})
    per_topic = st.fixed_dictionaries(
        {"class": st.just(1), "type": st.sampled_from([2, 3, 15]), "topic": topic, **common}
    )
    partition = st.fixed_dictionaries(
        {"class": st.just(2), "type": st.just(4), "topic": topic, "partition": st.integers(0, 50), **common}
    )
    return broker | per_topic | partition


def _cc_splice(record: dict, field: str, raw: bytes) -> bytes:
    return _cc_encode({**record, field: record[field].encode()[:3] + raw})


CC = WireFormat(
    "cruise-control",
    ("source.format=cruise-control", "source.cluster=fuzz", "metadata.source=file"),
    _cc_records,
    _cc_encode,
    ("topic",),
    ("value",),
    lambda value, now_ms: None if cc_verdict(value) is not None else "cc_verdict finds no record",
    splice=_cc_splice,
    text_record=lambda: _cc_records().filter(lambda r: "topic" in r),
)
_SCOPES = {"broker": 0, "topic": 1, "partition": 2}


def cc_verdict(value: bytes) -> dict | None:
    """The record a value must land as, read here record by record, or None where it must be quarantined:
    exact length, class 0-2, version 0, a known type of the class's scope, a Kafka-named UTF-8 topic, a
    plausible time, a finite non-negative value within source.max_rate / source.max_size."""
    from balancer import cruise_control as cc

    if len(value) < 15:
        return None
    cls, version, mtype, ts, broker = struct.unpack_from(">bbbqi", value, 0)
    if not 0 <= cls <= 2 or version != 0 or not 0 <= mtype < len(cc.RAW_METRIC_TYPES):
        return None
    name, scope = cc.RAW_METRIC_TYPES[mtype]
    if _SCOPES[scope] != cls:
        return None
    topic = partition = None
    at = 15
    if cls > 0:
        if len(value) < 19:
            return None
        (length,) = struct.unpack_from(">i", value, 15)
        if length < 0 or len(value) < 19 + length:
            return None
        try:
            topic = value[19 : 19 + length].decode("utf-8")
        except UnicodeDecodeError:
            return None
        if not re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", topic):
            return None
        at = 19 + length
        if cls == 2:
            if len(value) < at + 4:
                return None
            (partition,) = struct.unpack_from(">i", value, at)
            at += 4
    if len(value) != at + 8:
        return None
    (number,) = struct.unpack_from(">d", value, at)
    limit = 1e15 if name == "PARTITION_SIZE" else 1e13 if "BYTES" in name else math.inf
    if (
        not (tm.MIN_TS_MS <= ts <= time.time() * 1000 + tm.MAX_CLOCK_SKEW_MS)
        or broker < 0
        or (partition is not None and partition < 0)
        or not (math.isfinite(number) and 0 <= number <= limit)
    ):
        return None
    return {
        "type": ("broker", "topic", "partition")[cls],
        "metric": name,
        "ts": ts,
        "broker": broker,
        "topic": topic,
        "partition": partition,
        "metric_value": number,
    }


def test_fuzzed_cruise_control_values_each_land_in_exactly_one_table(spark, broker, tmp_path):
    values = list({value: (kind, value) for kind, value in draw(fuzz_values(CC), FUZZ_EXAMPLES)}.values())
    assert len(values) >= 2000
    assert len({kind for kind, _ in values}) == 7
    topic = f"fuzz-cc-{time.monotonic_ns()}"
    broker.create_topic(topic, partitions=1, config=LARGE_VALUES)
    sent = produce_all(
        broker.bootstrap_servers,
        topic,
        [(None if i % 3 else bytes([i % 256, 0xFF]), v) for i, (_, v) in enumerate(values)],
    )
    metadata = tmp_path / "metadata.json"
    metadata.write_text(json.dumps({"cluster": "fuzz", "brokers": [], "partitions": []}))
    raw, quarantine = land(spark, broker, topic, tmp_path, *CC.config, f"metadata.path={metadata}")

    bad = assert_lands_exactly_once(sent, raw, quarantine)
    landed = {r["kafka_offset"]: r for r in raw.to_pylist()}
    for offset, (kind, value) in enumerate(values):
        expected = cc_verdict(value)
        where = f"offset {offset} ({kind}) {value[:60]!r}"
        if expected is None:
            assert offset in bad, f"{where}: landed, but it is not a valid record"
            continue
        assert offset in landed, f"{where}: quarantined: {bad[offset]['reason']}"
        row = landed[offset]
        assert row["v"] == 0 and row["cluster"] == "fuzz", where
        assert {k: row[k] for k in expected if k != "ts"} == {
            k: v for k, v in expected.items() if k != "ts"
        }, where
        assert round(row["ts"].timestamp() * 1000) == expected["ts"], where
