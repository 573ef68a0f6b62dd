"""Cruise Control's wire format: the encoders against hand-built bytes, the vectorized decoder against a
record-by-record reference reader written here from the layout (MetricSerde), on chosen and fuzzed values."""

from __future__ import annotations

import math
import re
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from balancer import cruise_control as cc

T = 1_790_000_000_000
NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def test_metric_types_are_cruise_controls_enum():
    assert len(cc.RAW_METRIC_TYPES) == 63
    assert cc.RAW_METRIC_TYPES[0] == ("ALL_TOPIC_BYTES_IN", "broker")
    assert cc.RAW_METRIC_TYPES[4] == ("PARTITION_SIZE", "partition")
    assert cc.RAW_METRIC_TYPES[62] == ("BROKER_LOG_FLUSH_TIME_MS_999TH", "broker")
    for name in (
        "ALL_TOPIC_BYTES_IN",
        "ALL_TOPIC_BYTES_OUT",
        "TOPIC_BYTES_IN",
        "TOPIC_BYTES_OUT",
        "PARTITION_SIZE",
        "BROKER_CPU_UTIL",
        "ALL_TOPIC_REPLICATION_BYTES_IN",
        "ALL_TOPIC_REPLICATION_BYTES_OUT",
        "ALL_TOPIC_MESSAGES_IN_PER_SEC",
        "TOPIC_REPLICATION_BYTES_IN",
        "TOPIC_REPLICATION_BYTES_OUT",
        "TOPIC_PRODUCE_REQUEST_RATE",
        "TOPIC_FETCH_REQUEST_RATE",
        "TOPIC_MESSAGES_IN_PER_SEC",
    ):
        assert cc.RAW_METRIC_TYPES[getattr(cc, name)].name == name
        assert cc.METRIC_TYPE_IDS[name] == getattr(cc, name)
    scopes = [t.scope for t in cc.RAW_METRIC_TYPES]
    assert [i for i, s in enumerate(scopes) if s == "topic"] == [2, 3, 11, 12, 13, 14, 15]
    assert [i for i, s in enumerate(scopes) if s == "partition"] == [4]


def test_known_answer_partition_record():
    # PARTITION_SIZE of orders-7 reported by broker 3: 50 GiB at 1790000000000 ms.
    hand = bytes.fromhex("020004000001a0c4506c0000000003000000066f7264657273000000074229000000000000")
    packed = (
        struct.pack(">bbbqi", 2, 0, 4, T, 3)
        + struct.pack(">i", 6)
        + b"orders"
        + struct.pack(">i", 7)
        + struct.pack(">d", 50 * 2**30)
    )
    assert packed == hand
    assert cc.encode_partition_metric(cc.PARTITION_SIZE, T, 3, "orders", 7, 50.0 * 2**30) == hand
    assert cc.decode(pa.array([hand])).to_pylist() == [
        {
            "metric_class": 2,
            "version": 0,
            "metric_type": 4,
            "ts": T,
            "broker": 3,
            "topic": "orders",
            "partition": 7,
            "value": 53687091200.0,
            "error": None,
        }
    ]


def test_known_answer_broker_and_topic_records():
    broker = bytes.fromhex("000005000001a0c4506c00000000033fda3d70a3d70a3d")  # CPU 0.41
    assert cc.encode_broker_metric(cc.BROKER_CPU_UTIL, T, 3, 0.41) == broker
    topic = struct.pack(">bbbqii", 1, 0, 2, T, 3, 8) + b"my_topic" + struct.pack(">d", 1024.5)
    assert cc.encode_topic_metric(cc.TOPIC_BYTES_IN, T, 3, "my_topic", 1024.5) == topic
    rows = cc.decode(pa.array([broker, topic], pa.binary())).to_pylist()
    assert rows[0] == {
        "metric_class": 0,
        "version": 0,
        "metric_type": 5,
        "ts": T,
        "broker": 3,
        "topic": None,
        "partition": None,
        "value": 0.41,
        "error": None,
    }
    assert rows[1] == {
        "metric_class": 1,
        "version": 0,
        "metric_type": 2,
        "ts": T,
        "broker": 3,
        "topic": "my_topic",
        "partition": None,
        "value": 1024.5,
        "error": None,
    }


def every_record() -> list[tuple[bytes, dict]]:
    out = []
    for i, (name, scope) in enumerate(cc.RAW_METRIC_TYPES):
        value = float(i) * 1.5 - 3
        if scope == "broker":
            out.append(
                (
                    cc.encode_broker_metric(i, T + i, i, value),
                    {"metric_class": 0, "topic": None, "partition": None},
                )
            )
        elif scope == "topic":
            out.append(
                (
                    cc.encode_topic_metric(i, T + i, i, f"t.{name}-{i}", value),
                    {"metric_class": 1, "topic": f"t.{name}-{i}", "partition": None},
                )
            )
        else:
            out.append(
                (
                    cc.encode_partition_metric(i, T + i, i, "x" * 249, 2**31 - 1, value),
                    {"metric_class": 2, "topic": "x" * 249, "partition": 2**31 - 1},
                )
            )
    return out


def test_round_trip_every_metric_type():
    records = every_record()
    rows = cc.decode(pa.array([r for r, _ in records], pa.binary())).to_pylist()
    for i, ((_, expected), row) in enumerate(zip(records, rows)):
        assert row == {
            **expected,
            "version": 0,
            "metric_type": i,
            "ts": T + i,
            "broker": i,
            "value": float(i) * 1.5 - 3,
            "error": None,
        }
        assert reencode(row) == records[i][0]


def test_extreme_fields_and_nan_are_decoded_faithfully():
    nan = struct.unpack(">d", bytes.fromhex("7ff8000000000bad"))[0]
    values = [
        cc.encode_broker_metric(0, -(2**63), -(2**31), nan),
        cc.encode_topic_metric(2, 2**63 - 1, 2**31 - 1, "a", -math.inf),
        cc.encode_partition_metric(4, 0, 0, "_", -5, -0.0),
    ]
    rows = cc.decode(pa.array(values, pa.binary())).to_pylist()
    assert [r["error"] for r in rows] == [None, None, None]
    assert math.isnan(rows[0]["value"]) and rows[1]["value"] == -math.inf and rows[2]["partition"] == -5
    assert [reencode(r) for r in rows] == values  # the NaN's payload too


def test_encoders_validate_their_arguments():
    with pytest.raises(ValueError, match="metric_type: PARTITION_SIZE is a partition metric, not a broker"):
        cc.encode_broker_metric(cc.PARTITION_SIZE, T, 1, 1.0)
    with pytest.raises(ValueError, match="metric_type"):
        cc.encode_topic_metric(63, T, 1, "t", 1.0)
    with pytest.raises(ValueError, match="broker"):
        cc.encode_broker_metric(0, T, 2**31, 1.0)
    with pytest.raises(ValueError, match="time_ms"):
        cc.encode_broker_metric(0, 2**63, 1, 1.0)
    with pytest.raises(ValueError, match="partition"):
        cc.encode_partition_metric(4, T, 1, "t", 2**31, 1.0)
    with pytest.raises(ValueError, match="topic"):
        cc.encode_topic_metric(2, T, 1, "\ud800", 1.0)


GOOD_P = cc.encode_partition_metric(cc.PARTITION_SIZE, T, 3, "orders", 7, 1e9)
GOOD_T = cc.encode_topic_metric(cc.TOPIC_BYTES_IN, T, 3, "orders", 1e6)


def topic_record(topic: bytes, *, declared: int | None = None) -> bytes:
    length = len(topic) if declared is None else declared
    return struct.pack(">bbbqii", 1, 0, 2, T, 3, length) + topic + struct.pack(">d", 1.0)


BAD = [
    (None, "null value"),
    (b"", "empty value"),
    (b"\xff\xfe\x00", "too short for a header (3 bytes; the header is 15)"),
    (bytes(14), "too short for a header (14 bytes; the header is 15)"),
    (b"\x03" + GOOD_P[1:], "unknown metric class id 3"),
    (b"\xff" + GOOD_P[1:], "unknown metric class id -1"),
    (GOOD_P[:1] + b"\x01" + GOOD_P[2:], "unknown serde version 1 (this job reads 0)"),
    (GOOD_P[:1] + b"\xff" + GOOD_P[2:], "unknown serde version -1 (this job reads 0)"),
    (GOOD_P[:2] + b"\x3f" + GOOD_P[3:], "unknown metric type id 63"),
    (GOOD_P[:2] + b"\x80" + GOOD_P[3:], "unknown metric type id -128"),
    (
        GOOD_P[:2] + b"\x02" + GOOD_P[3:],
        "metric type TOPIC_BYTES_IN is a TOPIC metric but the record is a PARTITION metric",
    ),
    (
        b"\x00" + GOOD_P[1:23],
        "metric type PARTITION_SIZE is a PARTITION metric but the record is a BROKER metric",
    ),
    (cc.encode_broker_metric(0, T, 1, 1.0)[:22], "truncated (22 bytes, a BROKER metric is 23 bytes)"),
    (GOOD_T[:18], "truncated (18 bytes, a TOPIC metric is at least 27 bytes)"),
    (GOOD_P[:18], "truncated (18 bytes, a PARTITION metric is at least 31 bytes)"),
    (GOOD_P[:-1], "truncated (36 bytes, a PARTITION metric with a topic of 6 bytes is 37 bytes)"),
    (GOOD_T[:-8], "truncated (25 bytes, a TOPIC metric with a topic of 6 bytes is 33 bytes)"),
    (GOOD_P + b"\x00", "trailing bytes (38 bytes where 37 expected)"),
    (cc.encode_broker_metric(0, T, 1, 1.0) + bytes(4), "trailing bytes (27 bytes where 23 expected)"),
    (topic_record(b"orders", declared=-1), "negative topic length -1"),
    (topic_record(b"orders", declared=-(2**31)), "negative topic length -2147483648"),
    (
        topic_record(b"orders", declared=250),
        "oversized topic length 250 (a Kafka topic name is at most 249 bytes)",
    ),
    (
        topic_record(b"orders", declared=2**31 - 1),
        "oversized topic length 2147483647 (a Kafka topic name is at most 249 bytes)",
    ),
    (topic_record(b"\xff\xfe"), "topic is not valid UTF-8"),
    (topic_record(b"ab\xc3"), "topic is not valid UTF-8"),
    (topic_record(b"\xed\xa0\x80"), "topic is not valid UTF-8"),  # a surrogate
    (topic_record(b"\xc0\xaf"), "topic is not valid UTF-8"),  # overlong '/'
    (topic_record("café".encode()), "topic is not a valid Kafka metric topic name"),
    (topic_record(b"a b"), "topic is not a valid Kafka metric topic name"),
    (topic_record(b""), "topic is not a valid Kafka metric topic name"),
]


def test_every_kind_of_bad_value_gets_its_reason_and_no_topic():
    values = [GOOD_P] + [v for v, _ in BAD] + [GOOD_T]
    out = cc.decode(pa.array(values, pa.binary()))
    out.validate(full=True)
    rows = out.to_pylist()
    assert [r["error"] for r in rows] == [None] + [reason for _, reason in BAD] + [None]
    for row in rows[1:-1]:
        assert row["topic"] is None and row["partition"] is None and row["value"] is None
    assert rows[0]["topic"] == rows[-1]["topic"] == "orders"
    # The header is kept for attribution once the value holds one.
    assert rows[BAD.index((b"\x03" + GOOD_P[1:], "unknown metric class id 3")) + 1]["broker"] == 3


def test_sliced_large_string_and_chunked_inputs():
    values = [GOOD_P, None, GOOD_T, b"junk", GOOD_P]
    want = cc.decode(pa.array(values, pa.binary())).to_pylist()
    assert cc.decode(pa.array(values, pa.large_binary())).to_pylist() == want
    assert cc.decode(pa.array([b"x"] * 3 + values, pa.binary()).slice(3)).to_pylist() == want
    assert cc.decode(pa.chunked_array([values[:2], values[2:]], pa.binary())).to_pylist() == want
    assert cc.decode(pa.array([None, None], pa.binary())).field("error").to_pylist() == ["null value"] * 2
    assert len(cc.decode(pa.array([], pa.binary()))) == 0
    assert cc.decode(pa.array([], pa.binary())).type == cc.CC_VALUE_TYPE
    with pytest.raises(TypeError, match="values"):
        cc.decode(pa.array([1, 2]))


# A record-by-record reader written from the layout, independent of the vectorized one.
def reference(value: bytes | None) -> dict:  # noqa: C901 - MetricSerde's layout, one field at a time
    row = dict.fromkeys(
        ("metric_class", "version", "metric_type", "ts", "broker", "topic", "partition", "value")
    )
    if value is None:
        return {**row, "error": "null value"}
    n = len(value)
    if n == 0:
        return {**row, "error": "empty value"}
    if n < 15:
        return {**row, "error": f"too short for a header ({n} bytes; the header is 15)"}
    cls, version, typ, ts, broker = struct.unpack_from(">bbbqi", value)
    row.update(metric_class=cls, version=version, metric_type=typ, ts=ts, broker=broker)
    classes = ("BROKER", "TOPIC", "PARTITION")
    if not 0 <= cls <= 2:
        return {**row, "error": f"unknown metric class id {cls}"}
    if version != 0:
        return {**row, "error": f"unknown serde version {version} (this job reads 0)"}
    if not 0 <= typ < 63:
        return {**row, "error": f"unknown metric type id {typ}"}
    name, scope = cc.RAW_METRIC_TYPES[typ]
    if scope.upper() != classes[cls]:
        return {
            **row,
            "error": f"metric type {name} is a {scope.upper()} metric but the record is a "
            f"{classes[cls]} metric",
        }
    if cls == 0:
        if n != 23:
            return {
                **row,
                "error": f"truncated ({n} bytes, a BROKER metric is 23 bytes)"
                if n < 23
                else f"trailing bytes ({n} bytes where 23 expected)",
            }
        return {**row, "value": struct.unpack_from(">d", value, 15)[0], "error": None}
    if n < 19:
        return {
            **row,
            "error": f"truncated ({n} bytes, a {classes[cls]} metric is at least {27 + 4 * (cls - 1)} bytes)",
        }
    (length,) = struct.unpack_from(">i", value, 15)
    if length < 0:
        return {**row, "error": f"negative topic length {length}"}
    if length > 249:
        return {**row, "error": f"oversized topic length {length} (a Kafka topic name is at most 249 bytes)"}
    expected = 27 + length + 4 * (cls - 1)
    if n < expected:
        return {
            **row,
            "error": f"truncated ({n} bytes, a {classes[cls]} metric with a topic of {length} bytes "
            f"is {expected} bytes)",
        }
    if n > expected:
        return {**row, "error": f"trailing bytes ({n} bytes where {expected} expected)"}
    try:
        topic = value[19 : 19 + length].decode("utf-8")
    except UnicodeDecodeError:
        return {**row, "error": "topic is not valid UTF-8"}
    if not NAME.fullmatch(topic):
        return {**row, "error": "topic is not a valid Kafka metric topic name"}
    row.update(topic=topic, value=struct.unpack_from(">d", value, n - 8)[0], error=None)
    if cls == 2:
        row["partition"] = struct.unpack_from(">i", value, n - 12)[0]
    return row


def reencode(row: dict) -> bytes:
    if row["metric_class"] == 0:
        return cc.encode_broker_metric(row["metric_type"], row["ts"], row["broker"], row["value"])
    if row["metric_class"] == 1:
        return cc.encode_topic_metric(
            row["metric_type"], row["ts"], row["broker"], row["topic"], row["value"]
        )
    return cc.encode_partition_metric(
        row["metric_type"], row["ts"], row["broker"], row["topic"], row["partition"], row["value"]
    )


def same(a: dict, b: dict) -> bool:
    """Rows equal, NaN equal to NaN."""
    return (
        all(
            x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
            for x, y in zip(a.values(), b.values())
        )
        and a.keys() == b.keys()
    )


topics = st.one_of(
    st.from_regex(NAME, fullmatch=True).filter(lambda t: len(t.encode()) <= 249),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
    st.sampled_from(["orders", "a.b_c-d", "x" * 249, "x" * 250]),
)
metric_types = st.integers(0, 62)
valid_records = st.one_of(
    st.builds(
        lambda t, ts, b, v: cc.encode_broker_metric(t, ts, b, v),
        st.sampled_from([i for i, m in enumerate(cc.RAW_METRIC_TYPES) if m.scope == "broker"]),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.floats(),
    ),
    st.builds(
        lambda t, ts, b, topic, v: cc.encode_topic_metric(t, ts, b, topic, v),
        st.sampled_from([2, 3, 11, 12, 13, 14, 15]),
        st.integers(0, 2**62),
        st.integers(0, 2**31 - 1),
        topics,
        st.floats(),
    ),
    st.builds(
        lambda ts, b, topic, p, v: cc.encode_partition_metric(4, ts, b, topic, p, v),
        st.integers(0, 2**62),
        st.integers(0, 2**31 - 1),
        topics,
        st.integers(-(2**31), 2**31 - 1),
        st.floats(),
    ),
)


@st.composite
def mangled(draw) -> bytes | None:
    base = bytearray(draw(valid_records))
    how = draw(st.sampled_from(["keep", "cut", "flip", "append", "set", "random", "null"]))
    if how == "null":
        return None
    if how == "random":
        return draw(st.binary(max_size=300))
    if how == "cut":
        return bytes(base[: draw(st.integers(0, len(base)))])
    if how == "append":
        return bytes(base) + draw(st.binary(min_size=1, max_size=8))
    if how in ("flip", "set"):
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(base) - 1))
            base[i] = (
                (base[i] ^ (1 << draw(st.integers(0, 7)))) if how == "flip" else draw(st.integers(0, 255))
            )
    return bytes(base)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mangled(), min_size=1, max_size=40), st.integers(0, 3), st.booleans())
def test_fuzz_agrees_with_the_reference_reader(values, skip, large):
    array = pa.array([b"pad"] * skip + values, pa.large_binary() if large else pa.binary()).slice(skip)
    out = cc.decode(array)
    out.validate(full=True)  # the topic column is valid UTF-8 throughout
    rows = out.to_pylist()
    assert len(rows) == len(values)
    for value, row in zip(values, rows):
        assert same(row, reference(value)), (value, row)
        if row["error"] is None:
            assert reencode(row) == value


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=30))
def test_utf8_check_matches_python(chunks):
    flat = np.frombuffer(b"".join(chunks), dtype=np.uint8)
    rows = np.repeat(np.arange(len(chunks)), [len(c) for c in chunks])
    bad = set(cc._invalid_utf8(flat, rows, len(chunks)).tolist())
    for i, chunk in enumerate(chunks):
        try:
            chunk.decode("utf-8")
            assert i not in bad, chunk
        except UnicodeDecodeError:
            assert i in bad, chunk


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=6), min_size=1, max_size=30))
def test_utf8_check_accepts_any_valid_text(texts):
    chunks = [t.encode("utf-8", "surrogatepass") for t in texts]
    flat = np.frombuffer(b"".join(chunks), dtype=np.uint8)
    rows = np.repeat(np.arange(len(chunks)), [len(c) for c in chunks])
    bad = set(cc._invalid_utf8(flat, rows, len(chunks)).tolist())
    assert bad == {i for i, t in enumerate(texts) if any(0xD800 <= ord(ch) <= 0xDFFF for ch in t)}


def test_topics_beyond_a_string_columns_reach_are_refused_not_wrapped(monkeypatch):
    monkeypatch.setattr(cc, "_MAX_STRING_BYTES", 12)  # stands in for 2 GiB of topic bytes in one batch
    rows = cc.decode(pa.array([GOOD_P, topic_record(b"\xff"), GOOD_T, GOOD_T], pa.binary())).to_pylist()
    assert [r["topic"] for r in rows] == ["orders", None, None, None]
    assert rows[1]["error"] == "topic is not valid UTF-8"
    assert (
        rows[2]["error"]
        == rows[3]["error"]
        == "batch too large: its topics exceed 2 GiB; decode fewer values at once"
    )


def test_poison_pills_of_the_issue():
    big = b"\x00" * (10 << 20)
    rows = cc.decode(
        pa.array([b"\xff\xfe\x00" + b"\x00" * 40, big, bytes(23), bytes(1000), GOOD_P])
    ).to_pylist()
    assert rows[0]["error"] == "unknown metric class id -1"
    assert rows[1]["error"] == f"trailing bytes ({10 << 20} bytes where 23 expected)"
    # 23 zero bytes are a well-formed ALL_TOPIC_BYTES_IN record at time 0: the parser's time rule rejects it.
    assert rows[2] == {
        "metric_class": 0,
        "version": 0,
        "metric_type": 0,
        "ts": 0,
        "broker": 0,
        "topic": None,
        "partition": None,
        "value": 0.0,
        "error": None,
    }
    assert rows[3]["error"] == "trailing bytes (1000 bytes where 23 expected)"
    assert rows[4]["topic"] == "orders"
