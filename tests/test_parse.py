"""Every kind of bad telemetry gets a reason a person understands; good telemetry passes untouched."""

from __future__ import annotations

import json
import time

import pytest

from balancer import telemetry as tm
from balancer.spark.ingest.parse import parse_telemetry, quarantined_records, valid_records

NOW = int(time.time() * 1000) // 60_000 * 60_000  # a minute boundary: records land in whole windows
GOOD = tm.partition_record(
    ts=NOW,
    cluster="prod-eu-1",
    broker=3,
    topic="orders",
    partition=7,
    leader=True,
    replicas=[3, 1, 5],
    bytes_in=1e6,
    bytes_out=2e6,
    messages_in=5e3,
    size=1e9,
)
GOOD_BROKER = tm.broker_record(
    ts=NOW, cluster="prod-eu-1", broker=3, rack="eu-1a", network_in=1e8, network_out=2e8, disk=1e12, cpu=0.4
)


def with_(**changes) -> str:
    return json.dumps({**GOOD, **changes})


def without(field: str, record=GOOD) -> str:
    return json.dumps({k: v for k, v in record.items() if k != field})


def spliced(field: str, raw: bytes, record=GOOD) -> bytes:
    """``record`` as JSON with the string ``field`` holding ``raw`` bytes as they are."""
    return json.dumps({**record, field: "@@"}).encode().replace(b"@@", raw)


def not_utf8(value: bytes) -> tuple[bytes, str]:
    """A case whose reason names the first invalid byte, where Python's strict decoder finds it."""
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as error:
        return value, f"value is not valid UTF-8 at byte offset {error.start}"
    raise AssertionError(f"{value!r} is valid UTF-8")


LIMITS = {"max_value_bytes": 65536, "max_rate": 1e13, "max_size": 1e15}


CASES = {
    "not JSON": ("hello", "not a JSON object"),
    "truncated": (json.dumps(GOOD)[:40], "not a JSON object"),
    "a JSON array": ("[1, 2]", "not a JSON object"),
    "empty": ("", "empty value"),
    "unknown version": (with_(v=2), "unknown telemetry version v=2"),
    "version as text": (with_(v="one"), "unknown telemetry version v=one"),
    "missing version": (without("v"), "missing field 'v'"),
    "unknown type": (with_(type="topic"), "unknown type 'topic'"),
    "missing type": (without("type"), "missing field 'type'"),
    "missing bytes_in": (without("bytes_in"), "missing field 'bytes_in' for a partition record"),
    "missing capacity": (without("capacity", GOOD_BROKER), "missing field 'capacity' for a broker record"),
    "ts as text": (with_(ts="yesterday"), "field 'ts' must be an integer, got yesterday"),
    "leader as text": (with_(leader="yes"), "field 'leader' must be true or false"),
    "replicas of text": (with_(replicas=["a"]), "field 'replicas' must be an array of integers"),
    "negative rate": (with_(bytes_out=-5), "field 'bytes_out' is negative: -5"),
    "NaN rate": (with_(bytes_in="@").replace('"@"', "NaN"), "'bytes_in' is not a finite number"),
    "infinite rate": (with_(size="@").replace('"@"', "Infinity"), "'size' is not a finite number"),
    "negative broker id": (with_(broker=-1, replicas=[-1]), "field 'broker' is negative"),
    "broker id beyond int32": (with_(broker=2**40), "field 'broker' must be an integer"),
    "negative partition": (with_(partition=-2), "field 'partition' is negative"),
    "ts in seconds": (with_(ts=NOW // 1000), "not a plausible epoch-milliseconds time"),
    "ts in the far future": (with_(ts=NOW + 86_400_000 * 365), "not a plausible epoch-milliseconds time"),
    # Beyond what a timestamp's microseconds can hold: converting it would overflow and fail the task.
    "ts at the long's maximum": (with_(ts=2**63 - 1), "not a plausible epoch-milliseconds time"),
    "ts at the long's minimum": (with_(ts=-(2**63)), "not a plausible epoch-milliseconds time"),
    "empty cluster": (with_(cluster=" "), "field 'cluster' is empty"),
    "bad topic name": (with_(topic="orders/eu"), "not a valid Kafka topic name"),
    "empty replicas": (with_(replicas=[]), "field 'replicas' is empty"),
    "duplicate replica": (with_(replicas=[3, 3]), "lists a broker twice"),
    "reporter not a replica": (with_(broker=9), "broker 9 reports a replica but is not in replicas"),
    "zero capacity": (
        json.dumps({**GOOD_BROKER, "capacity": {"network_in": 0, "network_out": 1, "disk": 1}}),
        "field 'capacity.network_in' must be positive",
    ),
    "capacity without disk": (
        json.dumps({**GOOD_BROKER, "capacity": {"network_in": 1, "network_out": 1}}),
        "field 'capacity.disk' is missing or not a number",
    ),
    "oversized": (json.dumps({**GOOD, "pad": "x" * 70_000}), "over source.max_value_bytes=65536"),
    # from_json reads the first value and ignores the rest: each of these would land as GOOD.
    "bytes after the object": (json.dumps(GOOD) + "garbage", "bytes after the JSON object"),
    "two objects": (json.dumps(GOOD) + json.dumps(GOOD_BROKER), "bytes after the JSON object"),
    "a bracket after the object": (json.dumps(GOOD) + "]", "bytes after the JSON object"),
    "an element after the object": (json.dumps(GOOD) + ",0]", "bytes after the JSON object"),
    # Not JSON whitespace (RFC 8259 has space, tab, CR, LF only), though Python's str.strip() takes it.
    "a form feed after the object": (json.dumps(GOOD) + "\x0c", "bytes after the JSON object"),
    # Optional or other-type fields are still checked (the valid-record guard must see them too).
    "negative cpu on a partition record": (with_(cpu=-0.5), "field 'cpu' is negative"),
    "NaN cpu on a broker record": (
        json.dumps({**GOOD_BROKER, "cpu": "@"}).replace('"@"', "NaN"),
        "'cpu' is not a finite number",
    ),
    "NaN rate on a broker record": (
        json.dumps({**GOOD_BROKER, "bytes_in": "@"}).replace('"@"', "NaN"),
        "'bytes_in' is not a finite number",
    ),
    "negative partition on a broker record": (
        json.dumps({**GOOD_BROKER, "partition": -1}),
        "field 'partition' is negative",
    ),
    "partial capacity on a partition record": (
        with_(capacity={"network_in": 1, "network_out": 1}),
        "field 'capacity.disk' is missing or not a number",
    ),
    "infinite capacity": (
        json.dumps({**GOOD_BROKER, "capacity": {"network_in": 1, "network_out": "@", "disk": 1}}).replace(
            '"@"', "Infinity"
        ),
        "'capacity.network_out' is not a finite number",
    ),
    "null replica": (with_(replicas=[3, None]), "field 'replicas' holds an invalid broker id"),
    # Physically impossible figures (source.max_rate, source.max_size).
    "rate of 1e300 B/s": (
        with_(bytes_in=1e300),
        "field 'bytes_in' is 1.0E300 B/s, over source.max_rate=1e+13",
    ),
    "rate just over max_rate": (with_(bytes_out=1.0000001e13), "field 'bytes_out' is 1.0000001E13 B/s"),
    "messages over max_rate": (with_(messages_in=1e14), "field 'messages_in' is 1.0E14 messages/s"),
    "size over max_size": (with_(size=2e15), "field 'size' is 2.0E15 B, over source.max_size=1e+15"),
    "disk capacity over max_size": (
        json.dumps({**GOOD_BROKER, "capacity": {"network_in": 1, "network_out": 1, "disk": 1e300}}),
        "field 'capacity.disk' is 1.0E300 B, over source.max_size=1e+15",
    ),
    # Not UTF-8: Spark's from_json reads these as valid records, invalid bytes and all.
    "invalid UTF-8 in cluster": not_utf8(spliced("cluster", b"prod-\xff")),
    "invalid UTF-8 in topic": not_utf8(spliced("topic", b"\xc3\x28")),
    "UTF-16 surrogate in rack": not_utf8(spliced("rack", b"\xed\xa0\x80", GOOD_BROKER)),
    "U+FFFD then invalid UTF-8": not_utf8(spliced("cluster", "\ufffd".encode() + b"\xfe")),
    "invalid UTF-8 in an unknown field": not_utf8(spliced("note", b"\xfe", {**GOOD, "note": ""})),
    "binary": not_utf8(b"\xff\xfe\x00\x01"),
    "NUL bytes": (b"\x00" * 64, "not a JSON object"),
}


# Spellings where JSON parsers tend to disagree: whatever the source decodes must read as Spark reads it.
EDGE = [
    b'{"V":1}',
    b' {"v":1} ',
    b"null",
    b"1",
    b'"s"',
    b'{"v":1}x',
    b'{"v":1}\n{"v":1}',
    b'{"v":1}\n',
    b"{'v':1}",
    b'{"cluster":5}',
    b'{"cluster":true}',
    b'{"cluster":{"a":1}}',
    b'{"broker":3.0}',
    b'{"broker":1e2}',
    b'{"broker":"3"}',
    b'{"broker":-0}',
    b'{"ts":1.7e12}',
    b'{"ts":+5}',
    b'{"partition":01}',
    b'{"broker":1,"broker":2}',
    b'{"leader":1}',
    b'{"bytes_in":"5"}',
    b'{"bytes_in":1e400}',
    b'{"bytes_in":Inf}',
    b'{"bytes_in":-Infinity}',
    b'{"bytes_in":"NaN"}',
    b'{"bytes_in":-0.0}',
    b'{"cluster":"a\\u00e9"}',
    b'{"cluster":"\\ud800"}',
    b'{"cluster":"\xff"}',
    b'{"x\xff":1}',
    b'{"cluster":"a\tb"}',
    b'{"replicas":[1,null]}',
    b'{"capacity":null}',
    b'{"capacity":{"disk":"1"}}',
    b'{"_corrupt_record":"x"}',
    b'{"v":1,"x":{"y":[1,{}]}}',
    b'\xef\xbb\xbf{"v":1}',
]
SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def kafka_frame(spark, values: list[bytes], decoded_by: str):
    """Kafka-shaped rows; ``decoded_by="source"`` adds ``value_json`` as the kafka_py source makes it."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from balancer.spark.ingest.json_values import decode_json
    from balancer.spark.ingest.parse import TYPED_SCHEMA

    rows = [(None, v, "metrics", 0, offset, None) for offset, v in enumerate(values)]
    frame = spark.createDataFrame(rows, SCHEMA_DDL)
    if decoded_by == "spark":
        return frame
    decoded = decode_json(pa.array(values, pa.binary()), to_arrow_type(TYPED_SCHEMA))
    side = spark.createDataFrame(
        pa.table({"o": pa.array(range(len(values)), pa.int64()), "value_json": decoded})
    )
    return frame.join(side, frame["offset"] == side["o"]).drop("o")


def as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


@pytest.fixture(scope="module", params=["spark", "source"])
def parsed(spark, request):
    values = [json.dumps(GOOD), json.dumps(GOOD_BROKER)] + [value for value, _ in CASES.values()]
    frame = kafka_frame(spark, [as_bytes(v) for v in values], request.param)
    return parse_telemetry(frame, **LIMITS).cache()


@pytest.fixture(scope="module")
def quarantined(parsed) -> dict[int, list]:
    """The quarantined rows by Kafka offset, collected once: one Spark job for all the cases below."""
    rows: dict[int, list] = {}
    for row in quarantined_records(parsed).collect():
        rows.setdefault(row["kafka_offset"], []).append(row)
    return rows


@pytest.mark.integration
def test_good_records_pass_with_typed_fields(parsed):
    good = {r["kafka_offset"]: r for r in valid_records(parsed).collect()}
    assert set(good) == {0, 1}
    assert good[0]["replicas"] == [3, 1, 5] and good[0]["bytes_out"] == 2e6 and good[0]["leader"] is True
    assert good[1]["capacity_disk"] == 1e12 and good[1]["rack"] == "eu-1a"


@pytest.mark.integration
@pytest.mark.parametrize("case", list(CASES))
def test_bad_record_is_quarantined_with_reason(quarantined, case):
    offset = 2 + list(CASES).index(case)
    rows = quarantined.get(offset, [])
    assert len(rows) == 1, f"{case}: not quarantined"
    assert CASES[case][1] in rows[0]["reason"], rows[0]["reason"]
    assert rows[0]["kafka_topic"] == "metrics" and rows[0]["kafka_partition"] == 0
    # Nothing is lost: the value is kept as it arrived, byte for byte.
    assert rows[0]["value"] == as_bytes(CASES[case][0])


@pytest.mark.integration
def test_every_record_comes_out_once_with_a_verdict(parsed):
    """One row per input record (none dropped or repeated), and each either valid with no reason and no
    copy of its value, or with a non-empty reason and its value."""
    rows = parsed.select("kafka_offset", "quarantine_reason", "value").collect()
    assert sorted(r["kafka_offset"] for r in rows) == list(range(2 + len(CASES)))
    for r in rows:
        if r["kafka_offset"] < 2:
            assert r["quarantine_reason"] is None and r["value"] is None, r
        else:
            assert r["quarantine_reason"] and r["quarantine_reason"].strip() and r["value"] is not None, r


@pytest.mark.integration
def test_text_columns_hold_valid_utf8(parsed):
    """No text column carries invalid UTF-8: a value that is not UTF-8 is not parsed into fields."""
    from pyspark.sql import functions as F

    texts = [f.name for f in tm.FIELDS if f.type == "string"] + ["quarantine_reason"]
    rows = parsed.select(*(F.col(c).cast("binary").alias(c) for c in texts)).collect()
    for r in rows:
        for name in texts:
            if r[name] is not None:
                bytes(r[name]).decode("utf-8")  # strict: raises on invalid UTF-8
    offset = 2 + list(CASES).index("invalid UTF-8 in cluster")
    assert parsed.where(f"kafka_offset = {offset}").first()["cluster"] is None


@pytest.mark.integration
def test_valid_guard_is_true_only_for_valid_records(spark):
    """The shortcut past the rules must be taken for good records and never for bad ones."""
    from pyspark.sql import functions as F

    from balancer.spark.ingest.parse import _CORRUPT, TYPED_SCHEMA, _single_json_value, _valid_guard

    good = [
        json.dumps(GOOD),
        json.dumps(GOOD_BROKER),
        json.dumps({**GOOD_BROKER, "rack": None, "cpu": 0.0}),
        with_(bytes_in=0.0, size=0),
        with_(bytes_in=1e13, bytes_out=1e13, messages_in=1e13, size=1e15),
        json.dumps({**GOOD_BROKER, "capacity": {"network_in": 1e13, "network_out": 1e13, "disk": 1e15}}),
    ]
    values = good + [value for value, _ in CASES.values()]
    text = F.col("value").cast("string")
    guarded = F.when(
        (F.octet_length("value") <= 65536) & F.is_valid_utf8(text), text
    )  # as parse_telemetry does
    typed = F.from_json(
        guarded, TYPED_SCHEMA, {"columnNameOfCorruptRecord": _CORRUPT, "allowNonNumericNumbers": "true"}
    )
    guard = _valid_guard(
        typed, F.unix_millis(F.current_timestamp()), max_rate=LIMITS["max_rate"], max_size=LIMITS["max_size"]
    ) & _single_json_value(text)
    rows = (
        spark.createDataFrame([(as_bytes(v),) for v in values], "value binary")
        .select(guard.alias("g"))
        .collect()
    )
    assert [r["g"] for r in rows[: len(good)]] == [True] * len(good)
    assert [case for case, r in zip(CASES, rows[len(good) :]) if r["g"] is True] == []


@pytest.mark.integration
def test_source_decoding_reads_every_value_as_spark_does(spark):
    """Parsing with the source's ``value_json`` gives the same rows, field by field and reason by reason,
    as parsing with ``from_json`` alone: for every case above and every known point of disagreement."""
    values = (
        [json.dumps(GOOD).encode(), json.dumps(GOOD_BROKER).encode()]
        + [as_bytes(value) for value, _ in CASES.values()]
        + EDGE
    )
    results = {}
    for decoded_by in ("spark", "source"):
        rows = parse_telemetry(kafka_frame(spark, values, decoded_by), **LIMITS).collect()
        results[decoded_by] = {r["kafka_offset"]: r.asDict(recursive=True) for r in rows}
    assert len(results["source"]) == len(values)
    for offset, value in enumerate(values):
        assert repr(results["source"][offset]) == repr(results["spark"][offset]), value  # repr: NaN == NaN


def test_source_decodes_good_records_itself():
    """The fast path is taken: good telemetry comes back decoded, not left to Spark."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from balancer.spark.ingest.json_values import decode_json
    from balancer.spark.ingest.parse import TYPED_SCHEMA

    decoded = decode_json(
        pa.array([json.dumps(GOOD).encode(), json.dumps(GOOD_BROKER).encode()] * 500),
        to_arrow_type(TYPED_SCHEMA),
    )
    assert decoded.null_count == 0
    assert decoded[0].as_py()["replicas"] == [3, 1, 5] and decoded[1].as_py()["capacity"]["disk"] == 1e12
