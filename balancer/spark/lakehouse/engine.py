"""What a Delta backend does for ``Lakehouse``, and the values they share.

``DeltaBackend`` is the one interface both engines implement (``delta_rs.DeltaRsBackend``,
``delta_spark.DeltaSparkBackend``). A backend is called by ``Lakehouse`` only, with arguments the facade
has already validated (a known table, a non-negative batch id, known filter operators), so it checks
nothing twice and has no engine branch: whatever differs between the engines is a method of each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any, Literal, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame


class DeltaEngine(StrEnum):
    """The Delta implementation a ``Lakehouse`` reads and writes with (``lakehouse.engine``)."""

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
FILTER_OPS: tuple[FilterOp, ...] = ("=", "!=", "<", "<=", ">", ">=", "in")


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


class DeltaBackend(Protocol):
    """One Delta engine under a ``Lakehouse``'s root. ``table`` is always one of ``tables.TABLES``."""

    engine: DeltaEngine

    def create(self, table: str, properties: Mapping[str, str]) -> None:
        """Create ``table`` if missing; give it ``properties`` and the DDL's columns it lacks."""

    def committed_version(self, table: str, app_id: str) -> int | None:
        """Highest batch id ``app_id`` committed to ``table``, or None."""

    def append(self, table: str, data: DataFrame | pa.Table, *, app_id: str, batch_id: int) -> bool:
        """Append once per (app_id, batch_id); False when that batch was already committed."""

    def append_routed(
        self,
        frame: DataFrame,
        routes: type[Route],
        *,
        app_id: str,
        batch_id: int,
        summarize: Summarizer | None,
    ) -> RoutedAppend:
        """``append`` to each route's table and ``summarize`` the rows (see ``Lakehouse.append_routed``)."""

    def read(self, table: str, *, version: int | None) -> DataFrame:
        """``table`` at ``version`` (None: the latest)."""

    def read_range(self, table: str, column: str, lo_ms: int | None, hi_ms: int) -> DataFrame:
        """Rows with ``lo_ms <= column < hi_ms``, reading no file whose statistics rule the range out."""

    def column_max(self, table: str, column: str) -> Any:
        """Largest value of ``column``."""

    def select(self, table: str, columns: Sequence[str], filters: Sequence[Filter]) -> pa.Table:
        """``columns`` of the rows passing every filter, on the driver."""

    def compact(self, table: str) -> int:
        """Rewrite small files into big ones (no data change); the files removed."""
