"""Cruise Control's metrics-reporter wire format: vectorized decoding and exact encoding.

Pure: numpy + pyarrow. One module, over 500 lines: the decoder and the encoder must agree byte for byte
with the layout below, so the layout, both directions and their checks stay side by side.

Cruise Control's reporter (linkedin/cruise-control, ``cruise-control-metrics-reporter``,
``metric/MetricSerde.java`` and ``BrokerMetric``/``TopicMetric``/``PartitionMetric``) writes one
metric per Kafka record value, big-endian (Java ``ByteBuffer``); L is the topic's UTF-8 length::

    offset  size  field
    0       1     metric class id, signed: 0 BROKER, 1 TOPIC, 2 PARTITION
    1       1     serde version, always 0
    2       1     RawMetricType id (its enum ordinal)
    3       8     time, int64 epoch ms
    11      4     broker id, int32
    BROKER:    15: value float64                                           -> 23 bytes
    TOPIC:     15: int32 L, 19: topic, 19+L: value float64                 -> 27+L bytes
    PARTITION: 15: int32 L, 19: topic, 19+L: int32 partition, 23+L: value  -> 31+L bytes

:func:`decode` turns a binary Arrow array of such values into one :data:`CC_VALUE_TYPE` row per
value with numpy over the Arrow buffers, never a Python step per record. It is stricter than
Cruise Control's reader, which ignores trailing bytes, accepts negative versions and replaces
invalid UTF-8: a record this job cannot be sure of is quarantined rather than guessed at.

``error`` is NULL iff the value is a structurally valid version-0 record (and then it re-encodes
to exactly its bytes). Otherwise it holds the first failed rule. The header fields
(``metric_class`` .. ``broker``) are set whenever the value holds the 15-byte header, so a
quarantined record can still be attributed; ``topic``, ``partition`` and ``value`` only when
``error`` is NULL. Values are decoded faithfully (NaN, negative, any time): the Spark parser
applies the value rules, the same for both formats.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BROKER_METRIC, TOPIC_METRIC, PARTITION_METRIC = 0, 1, 2
METRIC_CLASSES = ("BROKER", "TOPIC", "PARTITION")  # by class id
SCOPES = ("broker", "topic", "partition")  # a RawMetricType's scope, by the class id that carries it
SERDE_VERSION = 0  # the only wire version there has ever been; the reader rejects any other
HEADER_BYTES = 15
MAX_TOPIC_BYTES = 249  # Kafka's limit on a topic name; metric names are ASCII, so bytes = chars


class RawMetricType(NamedTuple):
    name: str
    scope: str  # "broker", "topic" or "partition"


# RawMetricType by id; ids are the Java enum's ordinals (RawMetricType.forId indexes values()).
RAW_METRIC_TYPES: tuple[RawMetricType, ...] = tuple(
    RawMetricType(name, scope)
    for name, scope in (
        ("ALL_TOPIC_BYTES_IN", "broker"),  # 0
        ("ALL_TOPIC_BYTES_OUT", "broker"),  # 1
        ("TOPIC_BYTES_IN", "topic"),  # 2
        ("TOPIC_BYTES_OUT", "topic"),  # 3
        ("PARTITION_SIZE", "partition"),  # 4
        ("BROKER_CPU_UTIL", "broker"),  # 5
        ("ALL_TOPIC_REPLICATION_BYTES_IN", "broker"),  # 6
        ("ALL_TOPIC_REPLICATION_BYTES_OUT", "broker"),  # 7
        ("ALL_TOPIC_PRODUCE_REQUEST_RATE", "broker"),  # 8
        ("ALL_TOPIC_FETCH_REQUEST_RATE", "broker"),  # 9
        ("ALL_TOPIC_MESSAGES_IN_PER_SEC", "broker"),  # 10
        ("TOPIC_REPLICATION_BYTES_IN", "topic"),  # 11
        ("TOPIC_REPLICATION_BYTES_OUT", "topic"),  # 12
        ("TOPIC_PRODUCE_REQUEST_RATE", "topic"),  # 13
        ("TOPIC_FETCH_REQUEST_RATE", "topic"),  # 14
        ("TOPIC_MESSAGES_IN_PER_SEC", "topic"),  # 15
        ("BROKER_PRODUCE_REQUEST_RATE", "broker"),  # 16
        ("BROKER_CONSUMER_FETCH_REQUEST_RATE", "broker"),  # 17
        ("BROKER_FOLLOWER_FETCH_REQUEST_RATE", "broker"),  # 18
        ("BROKER_REQUEST_HANDLER_AVG_IDLE_PERCENT", "broker"),  # 19
        ("BROKER_REQUEST_QUEUE_SIZE", "broker"),  # 20
        ("BROKER_RESPONSE_QUEUE_SIZE", "broker"),  # 21
        ("BROKER_PRODUCE_REQUEST_QUEUE_TIME_MS_MAX", "broker"),  # 22
        ("BROKER_PRODUCE_REQUEST_QUEUE_TIME_MS_MEAN", "broker"),  # 23
        ("BROKER_CONSUMER_FETCH_REQUEST_QUEUE_TIME_MS_MAX", "broker"),  # 24
        ("BROKER_CONSUMER_FETCH_REQUEST_QUEUE_TIME_MS_MEAN", "broker"),  # 25
        ("BROKER_FOLLOWER_FETCH_REQUEST_QUEUE_TIME_MS_MAX", "broker"),  # 26
        ("BROKER_FOLLOWER_FETCH_REQUEST_QUEUE_TIME_MS_MEAN", "broker"),  # 27
        ("BROKER_PRODUCE_TOTAL_TIME_MS_MAX", "broker"),  # 28
        ("BROKER_PRODUCE_TOTAL_TIME_MS_MEAN", "broker"),  # 29
        ("BROKER_CONSUMER_FETCH_TOTAL_TIME_MS_MAX", "broker"),  # 30
        ("BROKER_CONSUMER_FETCH_TOTAL_TIME_MS_MEAN", "broker"),  # 31
        ("BROKER_FOLLOWER_FETCH_TOTAL_TIME_MS_MAX", "broker"),  # 32
        ("BROKER_FOLLOWER_FETCH_TOTAL_TIME_MS_MEAN", "broker"),  # 33
        ("BROKER_PRODUCE_LOCAL_TIME_MS_MAX", "broker"),  # 34
        ("BROKER_PRODUCE_LOCAL_TIME_MS_MEAN", "broker"),  # 35
        ("BROKER_CONSUMER_FETCH_LOCAL_TIME_MS_MAX", "broker"),  # 36
        ("BROKER_CONSUMER_FETCH_LOCAL_TIME_MS_MEAN", "broker"),  # 37
        ("BROKER_FOLLOWER_FETCH_LOCAL_TIME_MS_MAX", "broker"),  # 38
        ("BROKER_FOLLOWER_FETCH_LOCAL_TIME_MS_MEAN", "broker"),  # 39
        ("BROKER_LOG_FLUSH_RATE", "broker"),  # 40
        ("BROKER_LOG_FLUSH_TIME_MS_MAX", "broker"),  # 41
        ("BROKER_LOG_FLUSH_TIME_MS_MEAN", "broker"),  # 42
        ("BROKER_PRODUCE_REQUEST_QUEUE_TIME_MS_50TH", "broker"),  # 43
        ("BROKER_PRODUCE_REQUEST_QUEUE_TIME_MS_999TH", "broker"),  # 44
        ("BROKER_CONSUMER_FETCH_REQUEST_QUEUE_TIME_MS_50TH", "broker"),  # 45
        ("BROKER_CONSUMER_FETCH_REQUEST_QUEUE_TIME_MS_999TH", "broker"),  # 46
        ("BROKER_FOLLOWER_FETCH_REQUEST_QUEUE_TIME_MS_50TH", "broker"),  # 47
        ("BROKER_FOLLOWER_FETCH_REQUEST_QUEUE_TIME_MS_999TH", "broker"),  # 48
        ("BROKER_PRODUCE_TOTAL_TIME_MS_50TH", "broker"),  # 49
        ("BROKER_PRODUCE_TOTAL_TIME_MS_999TH", "broker"),  # 50
        ("BROKER_CONSUMER_FETCH_TOTAL_TIME_MS_50TH", "broker"),  # 51
        ("BROKER_CONSUMER_FETCH_TOTAL_TIME_MS_999TH", "broker"),  # 52
        ("BROKER_FOLLOWER_FETCH_TOTAL_TIME_MS_50TH", "broker"),  # 53
        ("BROKER_FOLLOWER_FETCH_TOTAL_TIME_MS_999TH", "broker"),  # 54
        ("BROKER_PRODUCE_LOCAL_TIME_MS_50TH", "broker"),  # 55
        ("BROKER_PRODUCE_LOCAL_TIME_MS_999TH", "broker"),  # 56
        ("BROKER_CONSUMER_FETCH_LOCAL_TIME_MS_50TH", "broker"),  # 57
        ("BROKER_CONSUMER_FETCH_LOCAL_TIME_MS_999TH", "broker"),  # 58
        ("BROKER_FOLLOWER_FETCH_LOCAL_TIME_MS_50TH", "broker"),  # 59
        ("BROKER_FOLLOWER_FETCH_LOCAL_TIME_MS_999TH", "broker"),  # 60
        ("BROKER_LOG_FLUSH_TIME_MS_50TH", "broker"),  # 61
        ("BROKER_LOG_FLUSH_TIME_MS_999TH", "broker"),  # 62
    )
)

(
    ALL_TOPIC_BYTES_IN,
    ALL_TOPIC_BYTES_OUT,
    TOPIC_BYTES_IN,
    TOPIC_BYTES_OUT,
    PARTITION_SIZE,
    BROKER_CPU_UTIL,
    ALL_TOPIC_REPLICATION_BYTES_IN,
    ALL_TOPIC_REPLICATION_BYTES_OUT,
    ALL_TOPIC_PRODUCE_REQUEST_RATE,
    ALL_TOPIC_FETCH_REQUEST_RATE,
    ALL_TOPIC_MESSAGES_IN_PER_SEC,
    TOPIC_REPLICATION_BYTES_IN,
    TOPIC_REPLICATION_BYTES_OUT,
    TOPIC_PRODUCE_REQUEST_RATE,
    TOPIC_FETCH_REQUEST_RATE,
    TOPIC_MESSAGES_IN_PER_SEC,
) = range(16)
METRIC_TYPE_IDS: dict[str, int] = {t.name: i for i, t in enumerate(RAW_METRIC_TYPES)}

CC_VALUE_TYPE = pa.struct(
    [
        ("metric_class", pa.int8()),
        ("version", pa.int8()),
        ("metric_type", pa.int8()),
        ("ts", pa.int64()),
        ("broker", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("value", pa.float64()),
        ("error", pa.string()),
    ]
)

# The class id that must carry each metric type (the Java constructors reject any other pairing).
_SCOPE_CLASS = np.array([SCOPES.index(t.scope) for t in RAW_METRIC_TYPES], dtype=np.int8)
# Bytes Kafka allows in a topic name, [a-zA-Z0-9._-]; metric topics have '.' as '_', but a
# reporter that kept the dots is still naming a real topic.
_NAME_BYTE = np.zeros(256, dtype=bool)
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-":
    _NAME_BYTE[_c] = True
_FIXED_BYTES = np.array([23, 27, 31], dtype=np.int64)  # record length without the topic, by class id
_MAX_STRING_BYTES = 2**31 - 1  # a pa.string() column's data (int32 offsets)

# Error kinds, in the order the rules are applied; a record gets the first that fails.
(
    _OK,
    _NULL,
    _EMPTY,
    _SHORT,
    _CLASS,
    _VERSION,
    _TYPE,
    _SCOPE,
    _TRUNC_FIXED,
    _NEG_LEN,
    _BIG_LEN,
    _TRUNC_TOPIC,
    _TRAILING,
    _UTF8,
    _NAME,
    _OVERFLOW,
) = range(16)


def decode(values: pa.Array) -> pa.StructArray:
    """One :data:`CC_VALUE_TYPE` row per value of a binary array (see the module docstring)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    if not isinstance(values, pa.Array):
        raise TypeError(f"values: expected a pyarrow binary Array, got {type(values).__name__}")
    if pa.types.is_string(values.type):
        values = values.view(pa.binary())
    elif pa.types.is_large_string(values.type):
        values = values.view(pa.large_binary())
    elif pa.types.is_binary_view(values.type) or pa.types.is_string_view(values.type):
        values = values.cast(pa.large_binary())
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        raise TypeError(f"values: expected binary or large_binary, got {values.type}")
    n = len(values)
    if n == 0:
        return pa.array([], CC_VALUE_TYPE)

    buffers = values.buffers()
    offset_type = np.int64 if pa.types.is_large_binary(values.type) else np.int32
    offsets = np.frombuffer(buffers[1], dtype=offset_type, count=values.offset + n + 1)[values.offset :]
    offsets = offsets.astype(np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    length = ends - starts
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    if len(data) < 32:  # rows a gather does not use read the header's place at offset 0 instead
        data = np.concatenate([data, np.zeros(32, np.uint8)])
    present = values.is_valid().to_numpy(zero_copy_only=False) if values.null_count else np.ones(n, bool)

    kind = np.zeros(n, dtype=np.uint8)
    pending = np.ones(n, dtype=bool)

    def fail(code: int, where: np.ndarray) -> None:
        hit = pending & where
        kind[hit] = code
        pending[hit] = False

    fail(_NULL, ~present)
    fail(_EMPTY, length == 0)
    fail(_SHORT, length < HEADER_BYTES)
    header = pending.copy()
    at = np.where(header, starts, 0)
    signed = data.view(np.int8)
    metric_class = signed[at]
    version = signed[at + 1]
    metric_type = signed[at + 2]
    ts = _be(data, ">i8")[at + 3].astype(np.int64)
    broker = _be(data, ">i4")[at + 11].astype(np.int32)

    fail(_CLASS, (metric_class < 0) | (metric_class > PARTITION_METRIC))
    fail(_VERSION, version != SERDE_VERSION)
    fail(_TYPE, (metric_type < 0) | (metric_type >= len(RAW_METRIC_TYPES)))
    cls = np.where(pending, metric_class, 0).astype(np.int64)
    typ = np.where(pending, metric_type, 0).astype(np.int64)
    fail(_SCOPE, _SCOPE_CLASS[typ] != cls)
    has_topic = cls != BROKER_METRIC
    # A topic/partition record must hold the topic length; a broker record has a fixed length.
    fail(_TRUNC_FIXED, np.where(has_topic, length < 19, length < 23))
    topic_len = np.where(
        pending & has_topic, _be(data, ">i4")[np.where(pending & has_topic, starts + 15, 0)], 0
    )
    topic_len = topic_len.astype(np.int64)
    fail(_NEG_LEN, topic_len < 0)
    fail(_BIG_LEN, topic_len > MAX_TOPIC_BYTES)
    expected = _FIXED_BYTES[cls] + topic_len
    fail(_TRUNC_TOPIC, has_topic & (length < expected))
    fail(_TRAILING, length > expected)

    # Topics: the bytes of every structurally sound topic record, in row order.
    with_topic = pending & has_topic
    fail(_NAME, with_topic & (topic_len == 0))
    with_topic &= pending
    topic_lens = np.where(with_topic, topic_len, 0)
    topic_ends = np.cumsum(topic_lens)
    fail(_OVERFLOW, topic_ends > _MAX_STRING_BYTES)
    if kind[with_topic].any():
        with_topic &= pending
        topic_lens = np.where(with_topic, topic_len, 0)
        topic_ends = np.cumsum(topic_lens)
    topic_offsets = np.concatenate([[0], topic_ends])
    topic_bytes = _gather(data, starts[with_topic] + 19, topic_lens[with_topic])
    odd = ~_NAME_BYTE[topic_bytes]
    if odd.any():
        odd_rows = np.zeros(n, dtype=bool)
        odd_rows[np.searchsorted(topic_offsets, np.flatnonzero(odd), side="right") - 1] = True
        not_utf8 = np.zeros(n, dtype=bool)
        rows = np.flatnonzero(odd_rows)
        lens = topic_lens[rows]
        picked = _gather(topic_bytes, topic_offsets[rows], lens)
        not_utf8[rows[_invalid_utf8(picked, np.repeat(np.arange(len(rows)), lens), len(rows))]] = True
        fail(_UTF8, not_utf8)
        fail(_NAME, odd_rows)
        # The column holds only the topics that passed: drop the rejected ones' bytes.
        keep = np.repeat(pending[with_topic], topic_lens[with_topic])
        topic_bytes = topic_bytes[keep]
        with_topic &= pending
        topic_lens = np.where(with_topic, topic_len, 0)
        topic_offsets = np.concatenate([[0], np.cumsum(topic_lens)])

    ok = pending
    value = _be(data, ">f8")[np.where(ok, ends - 8, 0)].astype(np.float64)
    is_partition = ok & (cls == PARTITION_METRIC)
    partition = _be(data, ">i4")[np.where(is_partition, ends - 12, 0)].astype(np.int32)

    topic = pa.Array.from_buffers(
        pa.string(),
        n,
        [_bitmap(with_topic), pa.py_buffer(topic_offsets.astype(np.int32)), pa.py_buffer(topic_bytes)],
        null_count=n - int(with_topic.sum()),
    )
    no_header = ~header
    return pa.StructArray.from_arrays(
        [
            pa.array(metric_class, pa.int8(), mask=no_header),
            pa.array(version, pa.int8(), mask=no_header),
            pa.array(metric_type, pa.int8(), mask=no_header),
            pa.array(ts, pa.int64(), mask=no_header),
            pa.array(broker, pa.int32(), mask=no_header),
            topic,
            pa.array(partition, pa.int32(), mask=~is_partition),
            pa.array(value, pa.float64(), mask=~ok),
            _errors(kind, length, metric_class, version, metric_type, cls, typ, topic_len, expected),
        ],
        fields=list(CC_VALUE_TYPE),
    )


def _be(data: np.ndarray, dtype: str) -> np.ndarray:
    """A big-endian number starting at every byte of ``data`` (an unaligned view, no copy)."""
    size = np.dtype(dtype).itemsize
    return np.ndarray(shape=(max(len(data) - size + 1, 0),), dtype=dtype, buffer=data, strides=(1,))


def _gather(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The bytes ``data[s:s+l]`` for each (s, l), concatenated."""
    ends = np.cumsum(lens)
    if len(ends) == 0 or ends[-1] == 0:
        return np.zeros(0, np.uint8)
    # Byte j of the output comes from data[j + (s - the output offset of its range)].
    return data[np.arange(ends[-1]) + np.repeat(starts - (ends - lens), lens)]


def _invalid_utf8(b: np.ndarray, row: np.ndarray, rows: int) -> np.ndarray:
    """Indices (< ``rows``) of the rows whose bytes are not valid UTF-8; ``row[i]`` owns byte ``b[i]``."""
    n = len(b)
    bad = (b == 0xC0) | (b == 0xC1) | (b >= 0xF5)
    need = np.zeros(n, dtype=np.int8)  # continuation bytes a lead byte needs
    need[(b >= 0xC2) & (b <= 0xDF)] = 1
    need[(b >= 0xE0) & (b <= 0xEF)] = 2
    need[(b >= 0xF0) & (b <= 0xF4)] = 3
    covered = np.zeros(n, dtype=bool)
    for k in (1, 2, 3):
        lead = np.flatnonzero(need >= k)
        past = lead + k >= n
        bad[lead[past]] = True
        lead = lead[~past]
        crosses = row[lead + k] != row[lead]
        bad[lead[crosses]] = True
        covered[lead[~crosses] + k] = True
    # Every continuation byte belongs to a lead byte, and nothing else sits inside a sequence.
    bad |= covered != ((b & 0xC0) == 0x80)
    # Overlong forms, surrogates and code points above U+10FFFF, by their second byte.
    second = np.append(b[1:], 0)
    bad |= ((b == 0xE0) & (second < 0xA0)) | ((b == 0xED) & (second > 0x9F))
    bad |= ((b == 0xF0) & (second < 0x90)) | ((b == 0xF4) & (second > 0x8F))
    return np.unique(row[bad])


def _bitmap(mask: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def _strings(numbers: np.ndarray) -> pa.Array:
    return pa.array(numbers).cast(pa.string())


def _errors(  # noqa: C901 - one `if` per error kind, in the order they are reported
    kind, length, metric_class, version, metric_type, cls, typ, topic_len, expected
) -> pa.StringArray:
    """The reason for each row (NULL where ``kind`` is OK), built one error kind at a time."""
    n = len(kind)
    if not kind.any():
        return pa.nulls(n, pa.string())
    classes = pa.array(METRIC_CLASSES)
    type_names = pa.array([t.name for t in RAW_METRIC_TYPES])
    scopes = pa.array([s.upper() for s in SCOPES])
    minimum = pa.array(["23", "at least 27", "at least 31"])
    position = np.full(n, -1, dtype=np.int64)
    pieces: list[pa.Array] = []
    filled = 0
    for code in np.unique(kind[kind != _OK]):
        rows = np.flatnonzero(kind == code)
        if code == _NULL:
            text = pa.array(["null value"] * len(rows), pa.string())
        elif code == _EMPTY:
            text = pa.array(["empty value"] * len(rows), pa.string())
        elif code == _SHORT:
            text = _join(
                "too short for a header (", _strings(length[rows]), f" bytes; the header is {HEADER_BYTES})"
            )
        elif code == _CLASS:
            text = _join("unknown metric class id ", _strings(metric_class[rows]))
        elif code == _VERSION:
            text = _join(
                "unknown serde version ", _strings(version[rows]), f" (this job reads {SERDE_VERSION})"
            )
        elif code == _TYPE:
            text = _join("unknown metric type id ", _strings(metric_type[rows]))
        elif code == _SCOPE:
            text = _join(
                "metric type ",
                type_names.take(pa.array(typ[rows])),
                " is a ",
                scopes.take(pa.array(_SCOPE_CLASS[typ[rows]])),
                " metric but the record is a ",
                classes.take(pa.array(cls[rows])),
                " metric",
            )
        elif code == _TRUNC_FIXED:
            text = _join(
                "truncated (",
                _strings(length[rows]),
                " bytes, a ",
                classes.take(pa.array(cls[rows])),
                " metric is ",
                minimum.take(pa.array(cls[rows])),
                " bytes)",
            )
        elif code == _NEG_LEN:
            text = _join("negative topic length ", _strings(topic_len[rows]))
        elif code == _BIG_LEN:
            text = _join(
                "oversized topic length ",
                _strings(topic_len[rows]),
                f" (a Kafka topic name is at most {MAX_TOPIC_BYTES} bytes)",
            )
        elif code == _TRUNC_TOPIC:
            text = _join(
                "truncated (",
                _strings(length[rows]),
                " bytes, a ",
                classes.take(pa.array(cls[rows])),
                " metric with a topic of ",
                _strings(topic_len[rows]),
                " bytes is ",
                _strings(expected[rows]),
                " bytes)",
            )
        elif code == _TRAILING:
            text = _join(
                "trailing bytes (",
                _strings(length[rows]),
                " bytes where ",
                _strings(expected[rows]),
                " expected)",
            )
        elif code == _UTF8:
            text = pa.array(["topic is not valid UTF-8"] * len(rows), pa.string())
        elif code == _NAME:
            text = pa.array(["topic is not a valid Kafka metric topic name"] * len(rows), pa.string())
        else:
            text = pa.array(
                ["batch too large: its topics exceed 2 GiB; decode fewer values at once"] * len(rows),
                pa.string(),
            )
        position[rows] = filled + np.arange(len(rows))
        pieces.append(text)
        filled += len(rows)
    pieces.append(pa.nulls(1, pa.string()))
    position[position < 0] = filled
    return pa.concat_arrays(pieces).take(pa.array(position))


def _join(*parts) -> pa.Array:
    return pc.binary_join_element_wise(*[pa.scalar(p) if isinstance(p, str) else p for p in parts], "")


def _check_type(metric_type: int, metric_class: int) -> None:
    if not isinstance(metric_type, int) or not 0 <= metric_type < len(RAW_METRIC_TYPES):
        raise ValueError(
            f"metric_type: expected a RawMetricType id in [0, {len(RAW_METRIC_TYPES)}), got {metric_type!r}"
        )
    scope = RAW_METRIC_TYPES[metric_type].scope
    if scope != SCOPES[metric_class]:
        raise ValueError(
            f"metric_type: {RAW_METRIC_TYPES[metric_type].name} is a {scope} metric, "
            f"not a {SCOPES[metric_class]} metric"
        )


def _check_int(name: str, value: int, bits: int) -> None:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    ):
        raise ValueError(f"{name}: expected a {bits}-bit signed integer, got {value!r}")


def _header(metric_class: int, metric_type: int, time_ms: int, broker: int) -> bytes:
    _check_type(metric_type, metric_class)
    _check_int("time_ms", time_ms, 64)
    _check_int("broker", broker, 32)
    return struct.pack(">bbbqi", metric_class, SERDE_VERSION, metric_type, time_ms, broker)


def _topic(topic: str) -> bytes:
    if not isinstance(topic, str):
        raise ValueError(f"topic: expected a str, got {topic!r}")
    try:
        raw = topic.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate; Java would write '?' instead
        raise ValueError(f"topic: not encodable as UTF-8 ({e.reason})") from None
    return struct.pack(">i", len(raw)) + raw


def encode_broker_metric(metric_type: int, time_ms: int, broker: int, value: float) -> bytes:
    """A BrokerMetric's value, byte for byte as ``MetricSerde.toBytes`` writes it."""
    return _header(BROKER_METRIC, metric_type, time_ms, broker) + struct.pack(">d", value)


def encode_topic_metric(metric_type: int, time_ms: int, broker: int, topic: str, value: float) -> bytes:
    """A TopicMetric's value, byte for byte as ``MetricSerde.toBytes`` writes it."""
    return _header(TOPIC_METRIC, metric_type, time_ms, broker) + _topic(topic) + struct.pack(">d", value)


def encode_partition_metric(
    metric_type: int, time_ms: int, broker: int, topic: str, partition: int, value: float
) -> bytes:
    """A PartitionMetric's value, byte for byte as ``MetricSerde.toBytes`` writes it."""
    _check_int("partition", partition, 32)
    return (
        _header(PARTITION_METRIC, metric_type, time_ms, broker)
        + _topic(topic)
        + struct.pack(">i", partition)
        + struct.pack(">d", value)
    )
