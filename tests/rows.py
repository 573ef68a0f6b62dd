"""Rows of the lakehouse's tables built by column name: a test names the columns it cares about, the
rest are None, and a name the table lacks is an error (a renamed column fails the test, not a position)."""

from __future__ import annotations

from typing import Any

from balancer.spark.lakehouse import spark_schema


def table_row(table: str, **values: Any) -> dict[str, Any]:
    """One row of ``table`` as a dict in the table's column order; unnamed columns are None."""
    names = spark_schema(table).names
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise KeyError(f"{table} has no column(s) {', '.join(unknown)}")
    return {name: values.get(name) for name in names}


def as_tuple(table: str, row: dict[str, Any]) -> tuple:
    """``row`` (from ``table_row``) as a tuple in the table's column order, for ``createDataFrame``."""
    return tuple(row[name] for name in spark_schema(table).names)


# One row per report of a closed window, as ``loads.replica_windows`` gives them (Spark DDL).
WINDOW_COLUMNS = (
    "cluster string, window_start timestamp, window_end timestamp, type string, broker int, topic string, "
    "partition int, bytes_in double, bytes_out double, messages_in double, size double, leader boolean, "
    "replicas array<int>, rack string, capacity_network_in double, capacity_network_out double, "
    "capacity_disk double, cpu double, last_ts timestamp, samples long"
)


def window_row(**values: Any) -> dict[str, Any]:
    """One row of ``WINDOW_COLUMNS`` by column name; unnamed columns are None."""
    names = [column.split()[0] for column in WINDOW_COLUMNS.split(", ")]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise KeyError(f"window rows have no column(s) {', '.join(unknown)}")
    return {name: values.get(name) for name in names}
