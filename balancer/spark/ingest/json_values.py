"""Decode JSON record values into typed Arrow columns inside the source's Python worker.

Spark's ``from_json`` was the most expensive step of landing telemetry (~5 µs of JVM time per
record on this machine, landing_bench); Arrow's C++ JSON reader does the same work in ~2 µs. The Kafka source
uses :func:`decode_json` to hand the JVM typed columns next to the raw value.

Contract: a row is decoded here only when the result is certainly what Spark's ``from_json``
(with ``allowNonNumericNumbers``) gives for that value; every other row is NULL, and the caller
decodes those with ``from_json``. So a NULL never means "bad record", only "not
decided here", and the quarantine rules stay in one place (``balancer.spark.ingest.parse``). A decoded
row's value is valid UTF-8 throughout (``parse`` relies on it and checks only the other rows). Rows left
to Spark:

* NULL values (tombstones);
* every value of a block Arrow rejects, narrowed down to the offending rows: not JSON, a
  field of another type than the schema's (Spark would report it), an integer out of range, a
  key given twice, invalid UTF-8;
* values that decode to JSON ``null`` (Spark's answer is NULL too);
* rows holding a NaN or infinite number in a field or a nested struct's field (not inside
  arrays; the telemetry has no array of numbers): the two parsers accept different spellings of them
  (``Inf``), and such a record is bad anyway, so Spark's reading of it is the one kept.

The input is never re-encoded: each value is wrapped as ``{"r":<value>}\\n`` by one vectorized
concatenation, so a value that is not exactly one JSON value cannot parse. A block must parse to
exactly one row per value: a value holding line breaks becomes several lines (the first starts
``{"r":``, the last ends ``}``, so neither is blank) and so either fails or adds rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

_PREFIX, _SUFFIX = b'{"r":', b"}\n"
_SPLIT = 16  # a rejected block is retried in this many parts, down to single rows
_READ = pj.ReadOptions(use_threads=False, block_size=1 << 22)


def decode_json(values: pa.Array, value_type: pa.StructType) -> pa.StructArray:
    """One struct (or NULL: left to Spark) per value of a binary array, typed as ``value_type``."""
    n = len(values)
    parse = pj.ParseOptions(
        explicit_schema=pa.schema([("r", value_type)]),
        unexpected_field_behavior="ignore",
        newlines_in_values=False,
    )
    eligible = pc.is_valid(values)
    every = values.null_count == 0
    chosen = values if every else values.filter(eligible)
    if len(chosen) == 0:
        return pa.nulls(n, value_type)
    wrapped = pc.binary_join_element_wise(pa.scalar(_PREFIX), chosen, pa.scalar(_SUFFIX), pa.scalar(b""))
    offsets = np.frombuffer(wrapped.buffers()[1], dtype=np.int32, count=len(wrapped) + 1 + wrapped.offset)
    offsets = offsets[wrapped.offset :]
    decoded = _decode_rows(wrapped.buffers()[2], offsets, 0, len(chosen), value_type, parse)
    if every:
        return decoded
    # Scatter back: rows not eligible point at one appended NULL.
    mask = eligible.to_numpy(zero_copy_only=False)
    index = np.where(mask, np.cumsum(mask) - 1, len(decoded))
    return pa.concat_arrays([decoded, pa.nulls(1, value_type)]).take(pa.array(index))


def _decode_rows(
    data: pa.Buffer, offsets: np.ndarray, lo: int, hi: int, value_type: pa.StructType, parse: pj.ParseOptions
) -> pa.StructArray:
    """Rows ``[lo, hi)`` of the wrapped values; a rejected range is split until the bad rows are alone."""
    start, end = int(offsets[lo]), int(offsets[hi])
    try:
        # The reader does not check UTF-8; Spark rejects a value that is not UTF-8 anywhere in it.
        pa.Array.from_buffers(
            pa.string(),
            hi - lo,
            [None, pa.py_buffer(offsets[lo : hi + 1] - start), data.slice(start, end - start)],
        ).validate(full=True)
        table = pj.read_json(
            pa.BufferReader(data.slice(start, end - start)), read_options=_READ, parse_options=parse
        )
        if table.num_rows != hi - lo:
            raise pa.ArrowInvalid(f"{table.num_rows} rows for {hi - lo} values")
        column = table.column(0).combine_chunks()
        column.validate(full=True)  # an escaped lone surrogate decodes to invalid UTF-8
        nonfinite = _nonfinite(column)
        return column if nonfinite is None else pc.if_else(nonfinite, pa.nulls(hi - lo, value_type), column)
    except pa.ArrowException:
        if hi - lo == 1:
            return pa.nulls(1, value_type)
    step = max(1, -(-(hi - lo) // _SPLIT))
    return pa.concat_arrays(
        [_decode_rows(data, offsets, i, min(i + step, hi), value_type, parse) for i in range(lo, hi, step)]
    )


def _nonfinite(column: pa.StructArray) -> pa.BooleanArray | None:
    """Rows with a NaN or infinite floating-point field, at any struct depth (None: no such row)."""
    found = None
    for i, field in enumerate(column.type):
        child = column.field(i)
        if pa.types.is_floating(field.type):
            hit = pc.fill_null(pc.invert(pc.is_finite(child)), False)
        elif pa.types.is_struct(field.type):
            hit = _nonfinite(child)
        else:
            continue
        if hit is not None and hit.true_count:
            found = hit if found is None else pc.or_(found, hit)
    return found
