"""The Delta tables: schemas from ``lakehouse/tables/*.sql``, idempotent appends, reads through the log.

Two engines, one interface:

- ``delta-rs`` (embedded default): reads back into Spark from the table's active file list
  (``DeltaTable.file_uris()``), never by globbing parquet. Writes of a Spark DataFrame are
  split between executors and driver (see ``Lakehouse.append``): executors write the parquet
  files into the table folder, the driver commits their add actions in one Delta transaction.
  An Arrow table already on the driver is written with ``write_deltalake``.
- ``delta-spark`` (cluster path): ``format("delta")``, needs Delta's jar on the classpath.

Appends are idempotent per (app_id, batch_id), so a micro-batch replayed after a crash
writes nothing twice. delta-rs does not skip a duplicate transaction by itself, so we
check ``transaction_version(app_id)`` first and record the new one in the same commit.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import operator
import re
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import IntEnum, StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, get_type_hints
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.schema import Field
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from balancer.delta_versions import version_at
from balancer.resources import sql_files
from balancer.spark.session import delta_jar_available
from balancer.storage import Storage

_COLUMNS = re.compile(r"CREATE TABLE IF NOT EXISTS\s+(\w+)\s*\((.*)\)\s*USING DELTA", re.S | re.I)


@cache
def table_ddl() -> dict[str, str]:
    """Table name → its column list in Spark DDL, read from lakehouse/tables/<name>.sql."""
    tables = {}
    for path in sql_files("lakehouse", "tables"):
        body = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("--"))
        match = _COLUMNS.search(body)
        if not match:
            raise ValueError(f"{path}: expected 'CREATE TABLE IF NOT EXISTS name (...) USING DELTA'")
        tables[match.group(1)] = " ".join(match.group(2).split())
    return tables


TABLES = tuple(table_ddl())


_SCALARS = {
    "STRING": T.StringType(),
    "INT": T.IntegerType(),
    "BIGINT": T.LongType(),
    "DOUBLE": T.DoubleType(),
    "BOOLEAN": T.BooleanType(),
    "TIMESTAMP": T.TimestampType(),
    "BINARY": T.BinaryType(),
}
_COLUMN = re.compile(r"^(\w+)\s+(ARRAY<(\w+)>|\w+)(\s+NOT NULL)?$", re.I)


def _column(definition: str, table: str) -> T.StructField:
    # Our DDL uses a small subset of Spark's types; parsed here because Spark's own DDL
    # parser needs a live JVM, and Python workers (applyInPandas) have none.
    match = _COLUMN.match(definition.strip())
    if not match:
        raise ValueError(f"lakehouse/tables/{table}.sql: cannot parse column {definition.strip()!r}")
    name, type_text, element, not_null = match.groups()
    if element:
        data_type = T.ArrayType(_SCALARS[element.upper()])
    elif type_text.upper() in _SCALARS:
        data_type = _SCALARS[type_text.upper()]
    else:
        raise ValueError(f"lakehouse/tables/{table}.sql: unsupported type {type_text!r} for column {name}")
    return T.StructField(name, data_type, nullable=not not_null)


@cache
def spark_schema(table: str) -> T.StructType:
    return T.StructType([_column(c, table) for c in table_ddl()[table].split(",")])


def arrow_schema(table: str) -> pa.Schema:
    return to_arrow_schema(spark_schema(table), timestamp_utc=True)


class DeltaEngine(StrEnum):
    """The Delta implementation a ``Lakehouse`` reads and writes with. Only ``Lakehouse`` branches on it:
    callers ask it for what they need (``append_routed``, ``select``, ...), whichever engine serves."""

    RS = "delta-rs"  # embedded: deltalake on the driver, parquet files written by executors
    SPARK = "delta-spark"  # cluster: Spark's format("delta"), needs Delta's jar on the classpath


# The column of ``append_routed``'s frame that holds each row's ``Route`` (a byte).
ROUTE_COLUMN = "_route"


class Route(IntEnum):
    """A destination table of ``append_routed``: a row lands in ``member.table`` when its ``ROUTE_COLUMN``
    holds the member's value. A subclass lists its members as ``NAME = value, "table"``."""

    table: str

    def __new__(cls, value: int, table: str) -> Route:
        member = int.__new__(cls, value)
        member._value_ = value
        member.table = table
        return member


# Comparisons ``Lakehouse.select`` takes, as (column, op, value) like delta-rs's and pyarrow's filters.
FilterOp = Literal["=", "!=", "<", "<=", ">", ">=", "in"]
Filter = tuple[str, FilterOp, Any]


class Summarizer(Protocol):
    """Reduces a frame's Arrow batches in the pass that writes them (picklable, pure Arrow): ``inputs`` are
    the frame's columns it reads; a call returns one batch's partial result, for the caller to reduce."""

    @property
    def inputs(self) -> Sequence[str]: ...

    def __call__(self, batch: pa.RecordBatch) -> pa.Table: ...


@dataclass(frozen=True)
class RoutedAppend:
    """What ``append_routed`` did: per table, whether this call committed it (False: the batch was already
    there); and ``summarize``'s partials over every row, concatenated (None: no rows or no ``summarize``)."""

    committed: Mapping[str, bool]
    summary: pa.Table | None


class Lakehouse:
    """The balancer's tables under one root (one sub-folder per table): a local folder, or an object-store
    URI (``s3://bucket/prefix``) with ``storage_options`` (see balancer/storage.py)."""

    def __init__(
        self,
        spark: SparkSession,
        root: str | Path,
        *,
        engine: Literal["auto", "delta-rs", "delta-spark"] | DeltaEngine = "auto",
        storage_options: dict[str, str] | None = None,
    ):
        if engine not in ("auto", *DeltaEngine):
            raise ValueError(f"engine must be 'auto', 'delta-rs' or 'delta-spark', got {engine!r}")
        if engine == "auto":
            engine = DeltaEngine.SPARK if delta_jar_available(spark) else DeltaEngine.RS
        elif engine == DeltaEngine.SPARK and not delta_jar_available(spark):
            raise RuntimeError(
                "lakehouse.engine is 'delta-spark' but Delta's jar is not on the Spark classpath; "
                "submit with spark-submit.sh (it passes --jars from jvm/lib, which make setup resolves) "
                "or set lakehouse.engine=delta-rs"
            )
        self.spark = spark
        self.storage = Storage.of(root, storage_options)
        self.root = self.storage.root
        self.engine = DeltaEngine(engine)
        if self.engine is DeltaEngine.SPARK:
            hadoop = spark.sparkContext._jsc.hadoopConfiguration()
            for key, value in self.storage.hadoop_conf().items():
                hadoop.set(key, value)

    def path(self, table: str) -> str:
        if table not in table_ddl():
            raise KeyError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return self.storage.join(table)

    def delta(self, table: str) -> DeltaTable:
        """The delta-rs handle of ``table`` (with the storage options)."""
        return DeltaTable(self.path(table), storage_options=self.storage.delta_options())

    def exists(self, table: str) -> bool:
        return DeltaTable.is_deltatable(self.path(table), storage_options=self.storage.delta_options())

    def create_all(self, properties: dict[str, str] | None = None) -> None:
        """Create the missing tables, each with the Delta table ``properties`` (default: the audit
        retention of ``lakehouse.retention``); an existing table whose properties differ gets them set."""
        if properties is None:
            from balancer.config import RetentionConfig

            properties = RetentionConfig().table_properties()
        if self.storage.local:
            Path(self.root).mkdir(parents=True, exist_ok=True)
        for table in TABLES:
            if self.engine is DeltaEngine.RS:
                delta = DeltaTable.create(
                    self.path(table),
                    schema=arrow_schema(table),
                    mode="ignore",
                    name=table,
                    configuration=properties,
                    storage_options=self.storage.delta_options(),
                )
                current = delta.metadata().configuration
                if any(current.get(key) != value for key, value in properties.items()):
                    delta.alter.set_table_properties(properties)
                # Columns the DDL gained since the table was created (nullable): older rows read null.
                have = set(delta.schema().to_arrow().names)
                added = [Field.from_arrow(f) for f in arrow_schema(table) if f.name not in have]
                if added:
                    delta.alter.add_columns(added)
            else:
                path, columns = self.path(table), table_ddl()[table]
                listed = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
                tblproperties = f" TBLPROPERTIES ({listed})" if properties else ""
                self.spark.sql(
                    f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({columns}) USING DELTA{tblproperties}"
                )
                current = {
                    row["key"]: row["value"]
                    for row in self.spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
                }
                if any(current.get(key) != value for key, value in properties.items()):
                    self.spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({listed})")

    # -- writes ---------------------------------------------------------------------------

    def committed_version(self, table: str, app_id: str) -> int | None:
        """Highest batch id committed to ``table`` by ``app_id``, or None."""
        if self.engine is DeltaEngine.RS:
            return self.delta(table).transaction_version(app_id)
        rows = (
            self.spark.sql(f"DESCRIBE HISTORY delta.`{self.path(table)}`")
            .select("operationParameters")
            .collect()
        )
        versions = [int(r[0].get("txnVersion", -1)) for r in rows if r[0] and r[0].get("txnAppId") == app_id]
        return max(versions) if versions else None

    def append(self, table: str, data: DataFrame | pa.Table, *, app_id: str, batch_id: int) -> bool:
        """Append once per (app_id, batch_id); returns False when that batch was already committed.

        delta-rs engine, which path: a DataFrame Spark's optimizer estimates at no more than
        ``DRIVER_MAX_BYTES`` (cached or aggregated data: rankings, plans, small batches) is collected
        and written by the driver with ``write_deltalake``: one Spark job and no Python worker,
        which for small frames is several times faster (benchmarks/README.md, "## Ingest").
        Anything bigger, or of unknown size (a Kafka micro-batch not yet cached), goes through
        the executors, and nothing but file metadata reaches the driver: each task writes its
        partition as one parquet file into the table folder and returns the file's path, size,
        row count and stats; the driver then commits all of them, plus the app transaction
        (app_id, batch_id), as ONE Delta commit. A partition holding less than
        ``INLINE_MAX_BYTES`` of Arrow data is instead sent back to the driver, which writes all
        such pieces as one file of the same commit: small tables (rankings, plans) get one file
        per batch instead of one per shuffle partition, and the driver never holds more than
        ``INLINE_MAX_BYTES`` per task (see ``write_files``).

        Crash safety: readers only see files named by an add action in the log. A batch that
        dies after some tasks wrote their files but before the driver's commit leaves those
        files as orphans, invisible to every reader (delta-rs, delta-spark, ``read`` here);
        Spark replays the batch, which writes new files under new names and commits them;
        ``DeltaTable.vacuum(full=True)`` deletes the orphans once older than the retention period
        (a default, "lite" vacuum only deletes files the log itself removed, never orphans). A
        batch whose commit did land is skipped on replay by the ``transaction_version`` check.
        """
        if self.engine is DeltaEngine.SPARK:
            done = self.committed_version(table, app_id)
            if done is not None and done >= batch_id:
                return False
            frame = (
                data
                if isinstance(data, DataFrame)
                else self.spark.createDataFrame(data.to_pandas(), spark_schema(table))
            )
            # Delta would also skip a (txnAppId, txnVersion) it has seen; the check above tells the caller.
            (
                frame.select(*spark_schema(table).names)
                .write.format("delta")
                .mode("append")
                .option("txnAppId", app_id)
                .option("txnVersion", batch_id)
                .save(self.path(table))
            )
            return True
        delta = self.delta(table)
        done = delta.transaction_version(app_id)
        if done is not None and done >= batch_id:
            return False
        if isinstance(data, DataFrame) and estimated_bytes(data) > DRIVER_MAX_BYTES:
            # An empty frame (the usual quarantine) costs one JVM-only job here instead of
            # starting Python workers that write nothing.
            actions = (
                []
                if data.isEmpty()
                else write_files(data, self.path(table), table, prefix=f"b{batch_id}", storage=self.storage)
            )
            self._commit_files(delta, table, actions, app_id, batch_id)
            return True
        arrow = data.toArrow() if isinstance(data, DataFrame) else data
        write_deltalake(
            delta,
            conform(arrow, arrow_schema(table), table),
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction(app_id, batch_id)]),
        )
        return True

    @staticmethod
    def _commit_files(
        delta: DeltaTable, table: str, actions: list[AddAction], app_id: str, batch_id: int
    ) -> None:
        """ONE Delta commit of files already written into the table's folder, recording (app_id, batch_id)."""
        commit = CommitProperties(app_transactions=[Transaction(app_id, batch_id)])
        delta.create_write_transaction(
            actions, mode="append", schema=arrow_schema(table), commit_properties=commit
        )

    def append_routed(
        self,
        frame: DataFrame,
        routes: type[Route],
        *,
        app_id: str,
        batch_id: int,
        summarize: Summarizer | None = None,
    ) -> RoutedAppend:
        """``append`` to each route's table in ONE pass over ``frame``: a row goes to ``route.table`` where
        its ``ROUTE_COLUMN`` holds ``route``, and ``summarize`` runs on the same Arrow
        batches (see ``write_routed``). One commit per table, each idempotent per (app_id, batch_id) as in
        ``append``; a table that already holds the batch gets no files, but its rows still pass
        ``summarize``. On delta-spark: one write per table and one Spark job for the summaries.
        """
        if not (isinstance(routes, type) and issubclass(routes, Route)):
            raise TypeError(f"routes must be a Route enum, got {routes!r}")
        if self.engine is DeltaEngine.SPARK:
            committed = {
                route.table: self.append(
                    route.table,
                    frame.where(F.col(ROUTE_COLUMN) == int(route)),
                    app_id=app_id,
                    batch_id=batch_id,
                )
                for route in routes
            }
            return RoutedAppend(committed, None if summarize is None else summarize_frame(frame, summarize))
        outputs: dict[Route, tuple[str, str]] = {}
        for route in routes:
            done = self.committed_version(route.table, app_id)
            if done is None or done < batch_id:
                outputs[route] = (route.table, self.path(route.table))
        actions, summary = write_routed(
            frame, outputs, routed=True, prefix=f"b{batch_id}", summarize=summarize, storage=self.storage
        )
        for table in actions:
            self._commit_files(self.delta(table), table, actions[table], app_id, batch_id)
        return RoutedAppend({route.table: route.table in actions for route in routes}, summary)

    # -- reads ----------------------------------------------------------------------------

    def read(self, table: str, *, as_of: int | dt.datetime | None = None) -> DataFrame:
        """``table`` as it is, or as it was ``as_of`` a table version or a time (Delta keeps every version
        until VACUUM removes the files of old ones). A time is the version committed at or before it
        (balancer.delta_versions), the same on both engines; before the table's first version, that
        version (its creation: no rows)."""
        if isinstance(as_of, dt.datetime):
            as_of = version_at(self.path(table), as_of, self.storage.delta_options()) or 0
        if self.engine is DeltaEngine.SPARK:
            reader = self.spark.read.format("delta")
            if as_of is not None:
                reader = reader.option("versionAsOf", as_of)
            return reader.load(self.path(table))
        schema = spark_schema(table)
        if not self.exists(table):
            return self.spark.createDataFrame([], schema)
        delta = self.delta(table)
        if as_of is not None:
            try:
                delta.load_as_version(as_of)
            except Exception as error:  # delta-rs raises its own errors, e.g. for a version it does not have
                raise ValueError(f"{table}: no version as of {as_of}: {error}") from None
        files = delta.file_uris()
        if not files:
            return self.spark.createDataFrame([], schema)
        return self._scan(table, files)

    def _scan(self, table: str, files: list[str]) -> DataFrame:
        """The parquet ``files`` of ``table`` as a DataFrame. Local files: Spark's reader. Object storage:
        executors read them with pyarrow and the storage options, since Spark's own reader would need
        Hadoop's S3A jars (hadoop-aws), which a pip-installed pyspark lacks."""
        if self.storage.local:
            return self.spark.read.schema(spark_schema(table)).parquet(*files)
        slices = max(1, min(len(files), self.spark.sparkContext.defaultParallelism))
        paths = self.spark.createDataFrame([(f,) for f in files], "path string").repartition(slices)
        return paths.mapInArrow(_file_reader(self.storage, table), spark_schema(table))

    def read_range(self, table: str, column: str, lo_ms: int | None, hi_ms: int) -> DataFrame:
        """Rows with ``lo_ms <= column < hi_ms`` (a timestamp column, epoch ms; ``lo_ms`` None: no lower
        limit). On delta-rs, files whose Delta statistics rule the range out are not even listed to
        Spark, so the cost follows the range, not the table's history (delta-spark skips them itself)."""
        in_range = F.unix_millis(column) < F.lit(hi_ms)
        if lo_ms is not None:
            in_range &= F.unix_millis(column) >= F.lit(lo_ms)
        if self.engine is DeltaEngine.SPARK:
            return self.read(table).where(in_range)
        path = self.path(table)
        if not self.exists(table):
            return self.spark.createDataFrame([], spark_schema(table))
        actions = pa.table(self.delta(table).get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return self.spark.createDataFrame([], spark_schema(table))
        paths = actions.column("path")
        lo_stat, hi_stat = f"min.{column}", f"max.{column}"
        if hi_stat in actions.column_names:  # a file without stats (null) is kept

            def micros(stat: str):
                return pc.cast(actions.column(stat).cast(pa.timestamp("us", tz="UTC")), pa.int64())

            outside = pc.fill_null(pc.greater_equal(micros(lo_stat), hi_ms * 1000), False)
            if lo_ms is not None:
                outside = pc.or_(outside, pc.fill_null(pc.less(micros(hi_stat), lo_ms * 1000), False))
            paths = paths.filter(pc.invert(outside))
        files = [f"{path}/{unquote(name)}" for name in paths.to_pylist()]
        if not files:
            return self.spark.createDataFrame([], spark_schema(table))
        return self._scan(table, files).where(in_range)

    def column_max(self, table: str, column: str):
        """Largest value of ``column``, from the Delta log's per-file statistics where every file has
        them (no data scanned: the table may hold months of telemetry), else by a scan."""
        if self.engine is DeltaEngine.RS:
            actions = pa.table(self.delta(table).get_add_actions(flatten=True))
            if actions.num_rows == 0:
                return None
            stat = f"max.{column}"
            if stat in actions.column_names and actions.column(stat).null_count == 0:
                return pc.max(actions.column(stat)).as_py()
        return self.read(table).agg(F.max(column)).first()[0]

    def select(self, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()) -> pa.Table:
        """``columns`` of the rows of a small table that pass every filter, on the driver. delta-rs reads them
        itself, the filters pushed down to its file statistics (no Spark job: milliseconds); delta-spark
        through one Spark job. A timestamp is compared with an aware ``datetime``."""
        columns = list(columns)
        for column, op, _ in filters:
            if op != "in" and op not in _COMPARE:
                raise ValueError(f"{table}.{column}: unknown filter operator {op!r}")
        if self.engine is DeltaEngine.SPARK:
            frame = self.read(table)
            for column, op, value in filters:
                frame = frame.where(_spark_condition(F.col(column), op, value))
            return frame.select(*columns).toArrow()
        if not self.exists(table):
            return arrow_schema(table).empty_table().select(columns)
        # delta-rs turns a column without min/max statistics (booleans and binary: _Stats writes none) into
        # a file guarantee ``column >= null`` that rules every file out; such filters run after the read.
        schema = arrow_schema(table)
        unbounded = {f.name for f in schema if pa.types.is_boolean(f.type) or pa.types.is_binary(f.type)}
        pushed = _conjunction(f for f in filters if f[0] not in unbounded)
        after = [f for f in filters if f[0] in unbounded]
        read = columns + [c for c in dict.fromkeys(f[0] for f in after) if c not in columns]
        found = self.delta(table).to_pyarrow_dataset().to_table(columns=read, filter=pushed)
        if after:
            found = found.filter(_conjunction(after)).select(columns)
        return found

    def compact(self, table: str) -> int:
        """Rewrite ``table``'s small files into big ones and checkpoint its log; returns the files
        removed. The rows stay as they are, and nothing is deleted: the commit only swaps files
        (dataChange=false), so every earlier version reads as before, and appends of the same moment
        (another job's) do not conflict with it."""
        if not self.exists(table):
            return 0
        if self.engine is DeltaEngine.SPARK:
            done = self.spark.sql(f"OPTIMIZE delta.`{self.path(table)}`").first()
            return int(done["metrics"]["numFilesRemoved"]) if done is not None else 0
        delta = self.delta(table)
        removed = int(delta.optimize.compact()["numFilesRemoved"])
        if removed:
            delta.create_checkpoint()
        return removed

    def register_views(self, *, as_of: int | dt.datetime | None = None) -> list[str]:
        """Temp views named like the tables, so SQL can say ``FROM balance_plans`` (each as of ``as_of``)."""
        for table in TABLES:
            self.read(table, as_of=as_of).createOrReplaceTempView(table)
        return list(TABLES)


_COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _spark_condition(column, op: FilterOp, value):
    return column.isin(list(value)) if op == "in" else _COMPARE[op](column, F.lit(value))


def _conjunction(filters: Iterable[Filter]):
    """``filters`` as one pyarrow dataset expression (None: no filter)."""
    condition = None
    for column, op, value in filters:
        term = _arrow_condition(column, op, value)
        condition = term if condition is None else condition & term
    return condition


def _arrow_condition(name: str, op: FilterOp, value):
    import pyarrow.dataset as ds

    column = ds.field(name)
    if op == "in":
        return column.isin(list(value))
    if isinstance(value, dt.datetime):
        value = pa.scalar(value, pa.timestamp("us", tz="UTC"))
    return _COMPARE[op](column, value)


# -- executor-side writes ---------------------------------------------------------------

# Frames Spark estimates at or under this are collected to the driver (see Lakehouse.append).
DRIVER_MAX_BYTES = 16 << 20


def estimated_bytes(frame: DataFrame) -> int:
    """Spark's optimizer estimate of ``frame``'s size (bytes); unknown → a huge number.

    Exact for cached data once materialized; filters, projections and aggregates keep the
    child's size (an upper bound); scans Spark knows nothing about report Long.MaxValue.
    """
    try:
        return int(str(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:  # Spark Connect (no _jdf), or a plan without statistics
        return 2**63 - 1


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


class _Stats:
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


def _file_reader(storage: Storage, table: str):
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
        self.stats = _Stats(schema)
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
