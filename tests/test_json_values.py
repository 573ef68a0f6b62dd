"""decode_json: the source's JSON decoder. Agreement with Spark's from_json is tested in test_parse.py;
here: which rows it decodes, and that every row lands back in its own place."""

from __future__ import annotations

import json

import pyarrow as pa

from balancer.spark.ingest.json_values import decode_json

TYPE = pa.struct(
    [
        ("n", pa.int32()),
        ("name", pa.string()),
        ("rate", pa.float64()),
        ("ids", pa.list_(pa.int32())),
        ("cap", pa.struct([("disk", pa.float64())])),
    ]
)


def record(i: int) -> bytes:
    return json.dumps(
        {"n": i, "name": f"r{i}", "rate": i / 2, "ids": [i, i + 1], "cap": {"disk": 1.0}}
    ).encode()


def test_bad_rows_are_left_to_spark_and_the_rest_stay_in_place():
    values = [record(i) for i in range(5000)]
    bad = {
        3: b"not json",
        1200: b'{"n":"x"}',
        1201: b'{"n":1,"n":2}',
        2500: b'{"name":"\xff"}',
        4999: b'{"rate":NaN}',
        4000: None,
    }
    for i, value in bad.items():
        values[i] = value
    decoded = decode_json(pa.array(values, pa.binary()), TYPE).to_pylist()
    assert [i for i, row in enumerate(decoded) if row is None] == sorted(bad)
    for i, row in enumerate(decoded):
        if i not in bad:
            assert row == {"n": i, "name": f"r{i}", "rate": i / 2, "ids": [i, i + 1], "cap": {"disk": 1.0}}


def test_values_holding_several_records_or_line_breaks_never_shift_rows():
    values = [
        record(0),
        record(1) + b"\n" + record(2),
        b'1}\n{"r":{"n":7}',
        record(3)[:-1] + b"\n}",
        record(4),
    ]
    decoded = decode_json(pa.array(values, pa.binary()), TYPE).to_pylist()
    assert [None if row is None else row["n"] for row in decoded] == [0, None, None, 3, 4]


def test_only_tombstones_or_nothing():
    assert decode_json(pa.array([None, None], pa.binary()), TYPE).null_count == 2
    assert len(decode_json(pa.array([], pa.binary()), TYPE)) == 0


def test_a_value_longer_than_a_reader_block():
    huge = json.dumps({"n": 1, "name": "x" * (5 << 20)}).encode()
    decoded = decode_json(pa.array([record(0), huge, record(2)], pa.binary()), TYPE).to_pylist()
    assert [row["n"] for row in decoded] == [0, 1, 2] and len(decoded[1]["name"]) == 5 << 20
