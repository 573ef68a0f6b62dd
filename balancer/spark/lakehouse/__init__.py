"""The Delta tables every stage reads and writes: their schemas (``tables``), the ``Lakehouse`` facade
(``facade``) and its scheduled compaction (``compaction``) over two backends behind one protocol
(``engine``: ``delta_rs`` embedded, ``delta_spark`` on a cluster), and the parquet files executors write
for delta-rs (``parquet``). Rule: only a backend knows its engine; callers ask the facade, which checks
their arguments, whichever engine serves.

The names below are the package's interface, imported from here."""

from balancer.spark.lakehouse.compaction import Compactor
from balancer.spark.lakehouse.engine import (
    ROUTE_COLUMN,
    DeltaBackend,
    DeltaEngine,
    Filter,
    FilterOp,
    Route,
    RoutedAppend,
    Summarizer,
)
from balancer.spark.lakehouse.facade import Lakehouse
from balancer.spark.lakehouse.tables import TABLES, arrow_schema, spark_schema, table_ddl

__all__ = [
    "ROUTE_COLUMN",
    "TABLES",
    "Compactor",
    "DeltaBackend",
    "DeltaEngine",
    "Filter",
    "FilterOp",
    "Lakehouse",
    "Route",
    "RoutedAppend",
    "Summarizer",
    "arrow_schema",
    "spark_schema",
    "table_ddl",
]
