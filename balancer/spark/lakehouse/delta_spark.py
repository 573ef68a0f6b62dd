"""The delta-spark backend (``lakehouse.engine: delta-spark``, the cluster path): Spark's ``format("delta")``
and Delta's SQL, which need Delta's jar on the classpath. Delta skips a (txnAppId, txnVersion) it has
seen; the backend still reads the table's transactions first, so the caller learns whether it wrote."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from balancer.spark.lakehouse.engine import ROUTE_COLUMN, DeltaEngine, Filter, Route, RoutedAppend, Summarizer
from balancer.spark.lakehouse.parquet import summarize_frame
from balancer.spark.lakehouse.tables import create_table, spark_schema
from balancer.storage import Storage

_COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class DeltaSparkBackend:
    engine = DeltaEngine.SPARK

    def __init__(self, spark: SparkSession, storage: Storage):
        self.spark = spark
        self.storage = storage
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in storage.hadoop_conf().items():
            hadoop.set(key, value)

    def _path(self, table: str) -> str:
        return self.storage.join(table)

    def create(self, table: str, properties: Mapping[str, str]) -> None:
        """By delta-rs (``tables.create_table``), as for the other engine; Delta's jar reads and writes the
        table from then on."""
        create_table(self.storage, table, properties)

    def committed_version(self, table: str, app_id: str) -> int | None:
        """The app's transaction as the table's log records it (the ``txn`` action each write's
        ``txnAppId``/``txnVersion`` adds), read by delta-rs from the snapshot: the latest checkpoint and
        the commits since, however long the history. Delta's history (``DESCRIBE HISTORY``) does not
        carry it, and reading it would grow with every commit."""
        return self.storage.delta_table(self._path(table)).transaction_version(app_id)

    def append(self, table: str, data: DataFrame | pa.Table, *, app_id: str, batch_id: int) -> bool:
        done = self.committed_version(table, app_id)
        if done is not None and done >= batch_id:
            return False
        frame = (
            data
            if isinstance(data, DataFrame)
            else self.spark.createDataFrame(data.to_pandas(), spark_schema(table))
        )
        (
            frame.select(*spark_schema(table).names)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", batch_id)
            .save(self._path(table))
        )
        return True

    def append_routed(
        self,
        frame: DataFrame,
        routes: type[Route],
        *,
        app_id: str,
        batch_id: int,
        summarize: Summarizer | None,
    ) -> RoutedAppend:
        """One write per table and one Spark job for the summaries."""
        committed = {
            route.table: self.append(
                route.table, frame.where(F.col(ROUTE_COLUMN) == int(route)), app_id=app_id, batch_id=batch_id
            )
            for route in routes
        }
        return RoutedAppend(committed, None if summarize is None else summarize_frame(frame, summarize))

    def read(self, table: str, *, version: int | None) -> DataFrame:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(self._path(table))

    def read_range(self, table: str, column: str, lo_ms: int | None, hi_ms: int) -> DataFrame:
        """Delta's own data skipping leaves out the files whose statistics rule the range out."""
        in_range = F.unix_millis(column) < F.lit(hi_ms)
        if lo_ms is not None:
            in_range &= F.unix_millis(column) >= F.lit(lo_ms)
        return self.read(table, version=None).where(in_range)

    def column_max(self, table: str, column: str) -> Any:
        return self.read(table, version=None).agg(F.max(column)).first()[0]

    def select(self, table: str, columns: Sequence[str], filters: Sequence[Filter]) -> pa.Table:
        """One Spark job."""
        frame = self.read(table, version=None)
        for name, op, value in filters:
            column = F.col(name)
            frame = frame.where(
                column.isin(list(value)) if op == "in" else _COMPARE[op](column, F.lit(value))
            )
        return frame.select(*columns).toArrow()

    def compact(self, table: str) -> int:
        done = self.spark.sql(f"OPTIMIZE delta.`{self._path(table)}`").first()
        return int(done["metrics"]["numFilesRemoved"]) if done is not None else 0
