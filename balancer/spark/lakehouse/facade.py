"""``Lakehouse``: the balancer's tables under one root, whichever Delta engine serves them.

Every argument is checked here, at the edge, and an error names the argument; the backend it delegates to
(``delta_rs`` or ``delta_spark``, one ``DeltaBackend``) is chosen once, in the constructor. Appends are
idempotent per (app_id, batch_id), so a micro-batch replayed after a crash writes nothing twice.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from balancer.delta_versions import version_at
from balancer.spark.lakehouse.delta_rs import DeltaRsBackend
from balancer.spark.lakehouse.delta_spark import DeltaSparkBackend
from balancer.spark.lakehouse.engine import (
    FILTER_OPS,
    DeltaBackend,
    DeltaEngine,
    Filter,
    Route,
    RoutedAppend,
    Summarizer,
)
from balancer.spark.lakehouse.tables import TABLES, arrow_schema, table_ddl
from balancer.spark.session import delta_jar_available
from balancer.storage import Storage

EngineChoice = Literal["auto", "delta-rs", "delta-spark"]


class Lakehouse:
    """The balancer's tables under one root (one sub-folder per table): a local folder, or an object-store
    URI (``s3://bucket/prefix``) with ``storage_options`` (see balancer/storage.py). ``engine`` ``auto``
    is delta-spark when Delta's jar is on the Spark classpath, else delta-rs."""

    def __init__(
        self,
        spark: SparkSession,
        root: str | Path,
        *,
        engine: EngineChoice | DeltaEngine = "auto",
        storage_options: dict[str, str] | None = None,
    ):
        if engine not in ("auto", *DeltaEngine):
            raise ValueError(f"engine must be 'auto', 'delta-rs' or 'delta-spark', got {engine!r}")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError(
                f"storage_options must be a dict of strings, got {type(storage_options).__name__}"
            )
        jar = delta_jar_available(spark)
        if engine == "auto":
            engine = DeltaEngine.SPARK if jar else DeltaEngine.RS
        elif engine == DeltaEngine.SPARK and not jar:
            raise RuntimeError(
                "lakehouse.engine is 'delta-spark' but Delta's jar is not on the Spark classpath; "
                "submit with spark-submit.sh (it passes --jars from jvm/lib, which make setup resolves) "
                "or set lakehouse.engine=delta-rs"
            )
        self.spark = spark
        self.storage = Storage.of(root, storage_options)
        self.root = self.storage.root
        self.engine = DeltaEngine(engine)
        backend = DeltaSparkBackend if self.engine is DeltaEngine.SPARK else DeltaRsBackend
        self.backend: DeltaBackend = backend(spark, self.storage)

    def path(self, table: str) -> str:
        """Where ``table`` lives; an unknown table is an error naming the known ones."""
        if table not in table_ddl():
            raise KeyError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return self.storage.join(table)

    def exists(self, table: str) -> bool:
        return self.storage.is_delta_table(self.path(table))

    def create_all(self, properties: dict[str, str] | None = None) -> None:
        """Create the missing tables, each with the Delta table ``properties`` (default: the audit
        retention of ``lakehouse.retention``); an existing table whose properties differ gets them set."""
        if properties is None:
            from balancer.config import RetentionConfig

            properties = RetentionConfig().table_properties()
        if self.storage.local:
            Path(self.root).mkdir(parents=True, exist_ok=True)
        for table in TABLES:
            self.backend.create(table, properties)

    # -- writes ---------------------------------------------------------------------------

    def committed_version(self, table: str, app_id: str) -> int | None:
        """Highest batch id committed to ``table`` by ``app_id``, or None."""
        self.path(table)
        _check_app_id(app_id)
        return self.backend.committed_version(table, app_id)

    def append(self, table: str, data: DataFrame | pa.Table, *, app_id: str, batch_id: int) -> bool:
        """Append once per (app_id, batch_id); returns False when that batch was already committed.
        How each engine writes, and why a crash between files and commit leaves no trace, is in the
        backends' ``append``."""
        self.path(table)
        _check_app_id(app_id)
        _check_batch_id(batch_id)
        if not isinstance(data, DataFrame | pa.Table):
            raise TypeError(f"data must be a Spark DataFrame or a pyarrow Table, got {type(data).__name__}")
        return self.backend.append(table, data, app_id=app_id, batch_id=batch_id)

    def append_rows(self, table: str, rows: Sequence[dict], *, app_id: str, batch_id: int) -> int:
        """``append`` of driver-side rows in ``table``'s schema; nothing is written when there are none.
        Returns the rows given (a replayed batch's are counted, though ``append`` skips them)."""
        if rows:
            self.append(
                table, pa.Table.from_pylist(list(rows), arrow_schema(table)), app_id=app_id, batch_id=batch_id
            )
        return len(rows)

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
        its ``ROUTE_COLUMN`` holds ``route``, and ``summarize`` runs on the same Arrow batches (see
        ``parquet.write_routed``). One commit per table, each idempotent per (app_id, batch_id) as in
        ``append``; a table that already holds the batch gets no files, but its rows still pass
        ``summarize``."""
        if not (isinstance(routes, type) and issubclass(routes, Route)):
            raise TypeError(f"routes must be a Route enum, got {routes!r}")
        if not isinstance(frame, DataFrame):
            raise TypeError(f"frame must be a Spark DataFrame, got {type(frame).__name__}")
        for route in routes:
            self.path(route.table)
        _check_app_id(app_id)
        _check_batch_id(batch_id)
        return self.backend.append_routed(
            frame, routes, app_id=app_id, batch_id=batch_id, summarize=summarize
        )

    # -- reads ----------------------------------------------------------------------------

    def read(self, table: str, *, as_of: int | dt.datetime | None = None) -> DataFrame:
        """``table`` as it is, or as it was ``as_of`` a table version or a time (Delta keeps every version
        until VACUUM removes the files of old ones). A time is the version committed at or before it
        (balancer.delta_versions), the same on both engines; before the table's first version, that
        version (its creation: no rows)."""
        path = self.path(table)
        if isinstance(as_of, dt.datetime):
            as_of = version_at(path, as_of, self.storage.delta_options()) or 0
        elif as_of is not None and (not isinstance(as_of, int) or isinstance(as_of, bool) or as_of < 0):
            raise ValueError(f"as_of must be a table version (an int >= 0) or a datetime, got {as_of!r}")
        return self.backend.read(table, version=as_of)

    def read_range(self, table: str, column: str, lo_ms: int | None, hi_ms: int) -> DataFrame:
        """Rows with ``lo_ms <= column < hi_ms`` (a timestamp column, epoch ms; ``lo_ms`` None: no lower
        limit), reading no file whose Delta statistics rule the range out: the cost follows the range,
        not the table's history."""
        self.path(table)
        return self.backend.read_range(table, column, lo_ms, hi_ms)

    def column_max(self, table: str, column: str) -> Any:
        """Largest value of ``column`` (None: no rows); from the log's statistics where the engine can."""
        self.path(table)
        return self.backend.column_max(table, column)

    def select(self, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()) -> pa.Table:
        """``columns`` of the rows of a small table that pass every filter, on the driver (delta-rs: no
        Spark job). A filter is (column, op, value); a timestamp is compared with an aware ``datetime``."""
        self.path(table)
        for column, op, _ in filters:
            if op not in FILTER_OPS:
                raise ValueError(f"{table}.{column}: unknown filter operator {op!r}")
        return self.backend.select(table, columns, filters)

    def compact(self, table: str) -> int:
        """Rewrite ``table``'s small files into big ones and checkpoint its log; returns the files
        removed. The rows stay as they are, and nothing is deleted: the commit only swaps files
        (dataChange=false), so every earlier version reads as before, and appends of the same moment
        (another job's) do not conflict with it."""
        if not self.exists(table):
            return 0
        return self.backend.compact(table)

    def register_views(self, *, as_of: int | dt.datetime | None = None) -> list[str]:
        """Temp views named like the tables, so SQL can say ``FROM balance_plans`` (each as of ``as_of``)."""
        for table in TABLES:
            self.read(table, as_of=as_of).createOrReplaceTempView(table)
        return list(TABLES)


def _check_app_id(app_id: str) -> None:
    if not isinstance(app_id, str) or not app_id:
        raise ValueError(f"app_id must be a non-empty string, got {app_id!r}")


def _check_batch_id(batch_id: int) -> None:
    if not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < 0:
        raise ValueError(f"batch_id must be an int >= 0, got {batch_id!r}")
