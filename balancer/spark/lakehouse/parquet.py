"""Delta data files written and read by Spark's executors, for the delta-rs backend.

Executors write a frame's partitions as parquet files into the table's folder and hand the driver each
file's add action (path, size, rows, Delta statistics); the driver commits them (``delta_rs``). A partition
under ``INLINE_MAX_BYTES`` is handed back as Arrow instead and written by the driver, so a small table gets
one file per commit. Everything here is pure Arrow and picklable: it runs in Python workers.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, get_args, get_type_hints

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from balancer.spark.lakehouse.engine import ROUTE_COLUMN, Summarizer
from balancer.spark.lakehouse.tables import arrow_schema
from balancer.storage import Storage

# A task whose partition holds less Arrow data than this ships it to the driver instead of
# writing its own file: a small table gets one file per commit, not one per shuffle partition,
# and the driver holds at most this much per task.
INLINE_MAX_BYTES = 4 << 20
_STRING_STAT_CHARS = 64


@dataclass(frozen=True)
class TaskResult:
    """What a writing task hands the driver (one row of ``write_routed``'s job): a parquet file it wrote into
    ``table``'s folder (``path``, ``size``, ``rows``, ``stats``, ``mtime``), or ``table``'s rows it held back
    as Arrow IPC (``inline``, written by the driver), or its ``summarize`` partials (``summary``, no table).
    """

    table: str | None
    path: str | None = None
    size: int = 0
    rows: int = 0
    stats: str | None = None
    mtime: int = 0
    inline: bytes | None = None
    summary: bytes | None = None

    def add_action(self) -> AddAction:
        return AddAction(self.path, self.size, {}, self.mtime, True, self.stats)


def _arrow_type(hint: Any) -> pa.DataType:
    """A field's Arrow type: ``X | None`` is a nullable X."""
    (base,) = [arg for arg in get_args(hint) if arg is not type(None)] or [hint]
    return {str: pa.string(), int: pa.int64(), bytes: pa.binary()}[base]


# The one schema of TaskResult rows, from its fields; Spark's (mapInArrow's) is derived from it.
TASK_RESULT_SCHEMA = pa.schema(
    [(name, _arrow_type(hint)) for name, hint in get_type_hints(TaskResult).items()]
)
_TASK_RESULT_SPARK_SCHEMA = from_arrow_schema(TASK_RESULT_SCHEMA)


def _ts_text(micros: int, round_up: bool) -> str:
    # Delta stats keep timestamps to the millisecond: round the max up and the min down so the
    # range still covers every value (data skipping must never skip a file that matches).
    millis = -(-micros // 1000) if round_up else micros // 1000
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=millis)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


class FileStats:
    """Delta add-action stats (numRecords, nullCount, minValues, maxValues) accumulated per batch."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.rows = 0
        self.nulls = {f.name: 0 for f in schema if not pa.types.is_nested(f.type)}
        self.lo: dict = {}
        self.hi: dict = {}
        self.unbounded: set[str] = set()

    def add(self, batch: pa.RecordBatch) -> None:
        self.rows += batch.num_rows
        for field in self.schema:
            if field.name not in self.nulls:
                continue
            column = batch.column(field.name)
            self.nulls[field.name] += column.null_count
            if (
                pa.types.is_boolean(field.type)
                or pa.types.is_binary(field.type)
                or column.null_count == len(column)
            ):
                continue  # Delta keeps no min/max for booleans and binary
            if pa.types.is_timestamp(field.type):
                column = column.cast(pa.int64())
            if pa.types.is_floating(field.type):
                column = pc.if_else(pc.is_nan(column), None, column)  # NaN has no order
            bounds = pc.min_max(column)
            try:
                lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
                # Neither JSON nor Delta can hold a bound of text that is not valid UTF-8, or an infinity:
                # such a column gets no min/max (readers then read the file). The parser keeps invalid
                # UTF-8 out of every string column; this only keeps a landing from failing if one slips by.
                bounded = not isinstance(lo, float) or (math.isfinite(lo) and math.isfinite(hi))
            except UnicodeDecodeError:
                bounded = False
            if bounded and (lo is None or field.name in self.unbounded):
                continue
            if not bounded:
                self.unbounded.add(field.name)
                self.lo.pop(field.name, None)
                self.hi.pop(field.name, None)
                continue
            self.lo[field.name] = lo if field.name not in self.lo else min(lo, self.lo[field.name])
            self.hi[field.name] = hi if field.name not in self.hi else max(hi, self.hi[field.name])

    def json(self) -> str:
        lo, hi = {}, {}
        for field in self.schema:
            name = field.name
            if name not in self.lo:
                continue
            if pa.types.is_timestamp(field.type):
                lo[name], hi[name] = _ts_text(self.lo[name], False), _ts_text(self.hi[name], True)
            elif pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
                # delta-rs prunes a file from an equality filter on a string column that lacks a min or a
                # max (measured: 36-character plan ids under a 32-character cap), so both are always
                # written: a long min cut to a prefix (a lower bound), a long max cut and followed by the
                # highest code point (an upper bound of every string with that prefix).
                lo[name] = self.lo[name][:_STRING_STAT_CHARS]
                high = self.hi[name]
                hi[name] = (
                    high if len(high) <= _STRING_STAT_CHARS else high[:_STRING_STAT_CHARS] + "\U0010ffff"
                )
            else:
                lo[name], hi[name] = self.lo[name], self.hi[name]
        return json.dumps(
            {"numRecords": self.rows, "minValues": lo, "maxValues": hi, "nullCount": self.nulls},
            allow_nan=False,
        )


def file_reader(storage: Storage, table: str):
    """mapInArrow function: each input row names a parquet file (a decoded path, as ``file_uris()`` and
    ``read_range`` give them); yields its rows in ``table``'s schema."""
    schema = arrow_schema(table)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uri in batch.column("path").to_pylist():
                with storage.filesystem.open_input_file(storage.fs_path(uri)) as source:
                    for piece in pq.ParquetFile(source).iter_batches(batch_size=1 << 16):
                        yield conform_batch(piece, schema, table)

    return read


class _ParquetFile:
    """One new parquet file in ``folder`` (a local path or a URI under ``storage``'s root), written batch by
    batch through ``storage``'s filesystem, with its Delta stats."""

    def __init__(self, folder: str, schema: pa.Schema, prefix: str, storage: Storage | None = None):
        self.name = f"part-{prefix}-{uuid.uuid4()}-c000.snappy.parquet"
        self.storage = storage or Storage.of(folder)
        self.full = self.storage.fs_path(folder) + "/" + self.name
        self.schema = schema
        self.stats = FileStats(schema)
        self.sink = None
        self.writer: pq.ParquetWriter | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.writer is None:
            self.sink = self.storage.filesystem.open_output_stream(self.full)
            self.writer = pq.ParquetWriter(self.sink, self.schema, compression="snappy")
        self.stats.add(batch)
        self.writer.write_batch(batch, row_group_size=1 << 20)

    def close(self, table: str | None = None) -> TaskResult | None:
        """The file as a ``TaskResult`` of ``table``, or None when nothing was written (no file exists)."""
        if self.writer is None:
            return None
        self.writer.close()
        self.sink.close()  # the writer leaves a stream it did not open to its owner
        info = self.storage.filesystem.get_file_info(self.full)
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
        return TaskResult(
            table, path=self.name, size=info.size, rows=self.stats.rows, stats=self.stats.json(), mtime=mtime
        )


def write_parquet(
    batches: Iterator[pa.RecordBatch],
    folder: str,
    schema: pa.Schema,
    prefix: str,
    storage: Storage | None = None,
) -> TaskResult | None:
    """Write ``batches`` as one new parquet file in ``folder``; its add-action fields, or None if empty."""
    file = _ParquetFile(folder, schema, prefix, storage)
    try:
        for batch in batches:
            file.add(batch)
    finally:
        meta = file.close()
    return meta


class _TaskOutput:
    """One table's share of a task: held in memory up to ``inline_max_bytes`` (then sent to the driver
    inline), else streamed into one parquet file of the task's own."""

    def __init__(self, folder: str, table: str, prefix: str, inline_max_bytes: int, storage: Storage | None):
        self.folder, self.table, self.prefix, self.storage = folder, table, prefix, storage
        self.schema = arrow_schema(table)
        self.inline_max_bytes = inline_max_bytes
        self.held: list[pa.RecordBatch] = []
        self.held_bytes = 0
        self.file: _ParquetFile | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        batch = conform_batch(batch, self.schema, self.table)
        if batch.num_rows == 0:
            return
        if self.file is not None:
            self.file.add(batch)
            return
        self.held.append(batch)
        self.held_bytes += batch.nbytes
        if self.held_bytes >= self.inline_max_bytes:
            self.file = _ParquetFile(self.folder, self.schema, self.prefix, self.storage)
            for held in self.held:
                self.file.add(held)
            self.held = []

    def result(self) -> TaskResult | None:
        if self.file is not None:
            return self.file.close(self.table)
        rows = sum(b.num_rows for b in self.held)
        if not rows:
            return None
        return TaskResult(
            self.table, rows=rows, inline=_ipc_bytes(pa.Table.from_batches(self.held, self.schema))
        )


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as ipc:
        ipc.write_table(table)
    return sink.getvalue().to_pybytes()


def _task_writer(
    outputs: Mapping[int, tuple[str, str]],
    routed: bool,
    prefix: str,
    inline_max_bytes: int,
    summarize: Summarizer | None,
    storage: Storage | None,
):
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tasks = {
            route: _TaskOutput(folder, table, prefix, inline_max_bytes, storage)
            for route, (table, folder) in outputs.items()
        }
        partials = []
        for batch in batches:
            if summarize is not None:
                partials.append(summarize(batch))
            for route, task in tasks.items():
                task.add(batch.filter(pc.equal(batch.column(ROUTE_COLUMN), route)) if routed else batch)
        results = [r for r in (task.result() for task in tasks.values()) if r is not None]
        if partials:
            results.append(TaskResult(None, summary=_ipc_bytes(pa.concat_tables(partials))))
        if results:
            yield pa.RecordBatch.from_pylist([asdict(r) for r in results], schema=TASK_RESULT_SCHEMA)

    return write


def write_files(
    frame: DataFrame,
    folder: str,
    table: str,
    *,
    prefix: str,
    inline_max_bytes: int | None = None,
    storage: Storage | None = None,
) -> list[AddAction]:
    """Executors write ``frame`` as parquet files in ``folder``; returns add actions for ONE commit.

    Partitions under ``inline_max_bytes`` come back to the driver as Arrow IPC and are written
    here as a single file. The files are not in the table until the caller commits the actions.
    """
    actions, _ = write_routed(
        frame,
        {0: (table, folder)},
        routed=False,
        prefix=prefix,
        inline_max_bytes=inline_max_bytes,
        storage=storage,
    )
    return actions[table]


def write_routed(
    frame: DataFrame,
    outputs: Mapping[int, tuple[str, str]],
    *,
    routed: bool,
    prefix: str,
    summarize: Summarizer | None = None,
    inline_max_bytes: int | None = None,
    storage: Storage | None = None,
) -> tuple[dict[str, list[AddAction]], pa.Table | None]:
    """``write_files`` for several tables in ONE pass over ``frame``. ``outputs[route]`` is (table, folder)
    for the rows whose ``ROUTE_COLUMN`` holds ``route`` (a route left out: those rows are not written);
    ``routed`` False: one output, every row. ``summarize`` runs on every Arrow batch
    of ``frame`` in the same pass; its partial results come back concatenated, for the caller to reduce.

    Returns the add actions per table (one commit each, the caller's) and the summaries (None without
    ``summarize`` or rows). ``storage`` (the lakehouse's root and options) reaches the executors with the
    task; None: the folders are local paths.
    """
    if inline_max_bytes is None:
        inline_max_bytes = INLINE_MAX_BYTES
    outputs = {int(route): out for route, out in outputs.items()}
    # The writers need only the tables' columns and the summary its inputs: don't ship the rest to Python.
    names = set().union(*(arrow_schema(table).names for table, _ in outputs.values()), {ROUTE_COLUMN})
    names |= set(summarize.inputs) if summarize is not None else set()
    frame = frame.select(*(c for c in frame.columns if c in names))
    results = [
        TaskResult(**row)
        for row in frame.mapInArrow(
            _task_writer(outputs, routed, prefix, inline_max_bytes, summarize, storage),
            _TASK_RESULT_SPARK_SCHEMA,
        )
        .toArrow()
        .to_pylist()
    ]
    actions: dict[str, list[AddAction]] = {}
    for table, folder in outputs.values():
        mine = [r for r in results if r.table == table]
        files = [r for r in mine if r.path is not None]
        pieces = [r.inline for r in mine if r.inline is not None]
        if pieces:
            batches = (batch for piece in pieces for batch in pa.ipc.open_stream(piece))
            written = write_parquet(batches, folder, arrow_schema(table), prefix, storage)
            if written is not None:
                files.append(written)
        actions[table] = [f.add_action() for f in files]
    summaries = [pa.ipc.open_stream(r.summary).read_all() for r in results if r.summary is not None]
    return actions, (pa.concat_tables(summaries) if summaries else None)


def summarize_frame(frame: DataFrame, summarize: Summarizer) -> pa.Table:
    """``summarize`` over every Arrow batch of ``frame`` (its ``inputs`` only), by one Spark job: its
    partials concatenated. Their schema is what ``summarize`` gives for no rows of ``frame``'s schema."""
    frame = frame.select(*summarize.inputs)
    empty = pa.RecordBatch.from_pylist([], schema=to_arrow_schema(frame.schema, timestamp_utc=True))
    schema = from_arrow_schema(summarize(empty).schema)

    def partials(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from summarize(batch).to_batches()

    return frame.mapInArrow(partials, schema).toArrow()


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema, table: str) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    return (
        conform(pa.Table.from_batches([batch]), schema, table).combine_chunks().to_batches()[0]
        if batch.num_rows
        else pa.RecordBatch.from_pylist([], schema=schema)
    )


def conform(arrow: pa.Table, schema: pa.Schema, table: str) -> pa.Table:
    """Arrow data in the table's column order and types; a missing column is an error naming it."""
    missing = [name for name in schema.names if name not in arrow.column_names]
    if missing:
        raise ValueError(f"{table}: data lacks column(s) {', '.join(missing)}")
    columns = []
    for field in schema:
        column = arrow.column(field.name)
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)
