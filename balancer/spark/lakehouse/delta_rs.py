"""The delta-rs backend (``lakehouse.engine: delta-rs``, the embedded default): deltalake on the driver.

Reads go back into Spark from the table's active file list (``DeltaTable.file_uris()``), never by globbing
parquet. A Spark DataFrame is written by executors and committed by the driver (``parquet``); an Arrow
table or a small frame by ``write_deltalake``. delta-rs does not skip a duplicate transaction by itself,
so every append checks ``transaction_version(app_id)`` first and records the new one in the same commit.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from balancer.spark.lakehouse.engine import DeltaEngine, Filter, Route, RoutedAppend, Summarizer
from balancer.spark.lakehouse.parquet import conform, file_reader, write_files, write_routed
from balancer.spark.lakehouse.tables import arrow_schema, create_table, spark_schema
from balancer.storage import Storage

# Frames Spark estimates at or under this are collected to the driver (see ``DeltaRsBackend.append``).
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


class DeltaRsBackend:
    engine = DeltaEngine.RS

    def __init__(self, spark: SparkSession, storage: Storage):
        self.spark = spark
        self.storage = storage

    def _path(self, table: str) -> str:
        return self.storage.join(table)

    def _delta(self, table: str) -> DeltaTable:
        return self.storage.delta_table(self._path(table))

    def _exists(self, table: str) -> bool:
        return self.storage.is_delta_table(self._path(table))

    def _empty(self, table: str) -> DataFrame:
        return self.spark.createDataFrame([], spark_schema(table))

    def create(self, table: str, properties: Mapping[str, str]) -> None:
        create_table(self.storage, table, properties)

    def committed_version(self, table: str, app_id: str) -> int | None:
        return self._delta(table).transaction_version(app_id)

    def append(self, table: str, data: DataFrame | pa.Table, *, app_id: str, batch_id: int) -> bool:
        """A DataFrame Spark's optimizer estimates at no more than ``DRIVER_MAX_BYTES`` (cached or aggregated
        data: rankings, plans, small batches) is collected and written by the driver with
        ``write_deltalake``: one Spark job and no Python worker, several times faster for small frames.
        Anything bigger, or of unknown size (a Kafka micro-batch not yet cached), goes through the
        executors (``parquet.write_files``): nothing but file metadata reaches the driver, which commits
        every file plus the app transaction (app_id, batch_id) as ONE Delta commit.

        Crash safety: readers only see files named by an add action in the log. A batch that dies after
        some tasks wrote their files but before the driver's commit leaves those files as orphans,
        invisible to every reader; Spark replays the batch, which writes new files under new names and
        commits them; ``DeltaTable.vacuum(full=True)`` deletes the orphans once older than the retention
        period (a default, "lite" vacuum only deletes files the log itself removed, never orphans). A batch
        whose commit did land is skipped on replay by the ``transaction_version`` check.
        """
        delta = self._delta(table)
        done = delta.transaction_version(app_id)
        if done is not None and done >= batch_id:
            return False
        if isinstance(data, DataFrame) and estimated_bytes(data) > DRIVER_MAX_BYTES:
            # An empty frame (the usual quarantine) costs one JVM-only job here instead of
            # starting Python workers that write nothing.
            actions = (
                []
                if data.isEmpty()
                else write_files(data, self._path(table), table, prefix=f"b{batch_id}", storage=self.storage)
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
        summarize: Summarizer | None,
    ) -> RoutedAppend:
        """One pass over ``frame``: each Python task writes each route's rows into its table's folder and
        runs ``summarize`` on the same batches; the driver then commits each table once."""
        outputs: dict[Route, tuple[str, str]] = {}
        for route in routes:
            done = self.committed_version(route.table, app_id)
            if done is None or done < batch_id:
                outputs[route] = (route.table, self._path(route.table))
        actions, summary = write_routed(
            frame, outputs, routed=True, prefix=f"b{batch_id}", summarize=summarize, storage=self.storage
        )
        for table in actions:
            self._commit_files(self._delta(table), table, actions[table], app_id, batch_id)
        return RoutedAppend({route.table: route.table in actions for route in routes}, summary)

    def read(self, table: str, *, version: int | None) -> DataFrame:
        if not self._exists(table):
            return self._empty(table)
        delta = self._delta(table)
        if version is not None:
            try:
                delta.load_as_version(version)
            except Exception as error:  # delta-rs raises its own errors, e.g. for a version it does not have
                raise ValueError(f"{table}: no version as of {version}: {error}") from None
        files = delta.file_uris()
        if not files:
            return self._empty(table)
        return self._scan(table, files)

    def _scan(self, table: str, files: list[str]) -> DataFrame:
        """The parquet ``files`` of ``table`` as a DataFrame. Local files: Spark's reader. Object storage:
        executors read them with pyarrow and the storage options, since Spark's own reader would need
        Hadoop's S3A jars (hadoop-aws), which a pip-installed pyspark lacks."""
        if self.storage.local:
            return self.spark.read.schema(spark_schema(table)).parquet(*files)
        slices = max(1, min(len(files), self.spark.sparkContext.defaultParallelism))
        paths = self.spark.createDataFrame([(f,) for f in files], "path string").repartition(slices)
        return paths.mapInArrow(file_reader(self.storage, table), spark_schema(table))

    def read_range(self, table: str, column: str, lo_ms: int | None, hi_ms: int) -> DataFrame:
        """Files whose Delta statistics rule the range out are not even listed to Spark, so the cost
        follows the range, not the table's history."""
        in_range = F.unix_millis(column) < F.lit(hi_ms)
        if lo_ms is not None:
            in_range &= F.unix_millis(column) >= F.lit(lo_ms)
        if not self._exists(table):
            return self._empty(table)
        actions = pa.table(self._delta(table).get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return self._empty(table)
        paths = actions.column("path")
        lo_stat, hi_stat = f"min.{column}", f"max.{column}"
        if hi_stat in actions.column_names:  # a file without stats (null) is kept

            def micros(stat: str):
                return pc.cast(actions.column(stat).cast(pa.timestamp("us", tz="UTC")), pa.int64())

            outside = pc.fill_null(pc.greater_equal(micros(lo_stat), hi_ms * 1000), False)
            if lo_ms is not None:
                outside = pc.or_(outside, pc.fill_null(pc.less(micros(hi_stat), lo_ms * 1000), False))
            paths = paths.filter(pc.invert(outside))
        files = [f"{self._path(table)}/{unquote(name)}" for name in paths.to_pylist()]
        if not files:
            return self._empty(table)
        return self._scan(table, files).where(in_range)

    def column_max(self, table: str, column: str) -> Any:
        """From the Delta log's per-file statistics where every file has them (no data scanned: the table
        may hold months of telemetry), else by a scan."""
        actions = pa.table(self._delta(table).get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return None
        stat = f"max.{column}"
        if stat in actions.column_names and actions.column(stat).null_count == 0:
            return pc.max(actions.column(stat)).as_py()
        return self.read(table, version=None).agg(F.max(column)).first()[0]

    def select(self, table: str, columns: Sequence[str], filters: Sequence[Filter]) -> pa.Table:
        """delta-rs reads the rows itself, the filters pushed down to its file statistics (no Spark job:
        milliseconds)."""
        columns = list(columns)
        if not self._exists(table):
            return arrow_schema(table).empty_table().select(columns)
        # delta-rs turns a column without min/max statistics (booleans and binary: FileStats writes none)
        # into a file guarantee ``column >= null`` that rules every file out; such filters run after the read.
        schema = arrow_schema(table)
        unbounded = {f.name for f in schema if pa.types.is_boolean(f.type) or pa.types.is_binary(f.type)}
        pushed = _conjunction(f for f in filters if f[0] not in unbounded)
        after = [f for f in filters if f[0] in unbounded]
        read = columns + [c for c in dict.fromkeys(f[0] for f in after) if c not in columns]
        found = self._delta(table).to_pyarrow_dataset().to_table(columns=read, filter=pushed)
        if after:
            found = found.filter(_conjunction(after)).select(columns)
        return found

    def compact(self, table: str) -> int:
        """delta-rs's compaction, then a checkpoint of the log."""
        delta = self._delta(table)
        removed = int(delta.optimize.compact()["numFilesRemoved"])
        if removed:
            delta.create_checkpoint()
        return removed


_COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _conjunction(filters: Iterable[Filter]):
    """``filters`` as one pyarrow dataset expression (None: no filter)."""
    import pyarrow.dataset as ds

    condition = None
    for name, op, value in filters:
        column = ds.field(name)
        if op == "in":
            term = column.isin(list(value))
        else:
            if isinstance(value, dt.datetime):
                value = pa.scalar(value, pa.timestamp("us", tz="UTC"))
            term = _COMPARE[op](column, value)
        condition = term if condition is None else condition & term
    return condition
