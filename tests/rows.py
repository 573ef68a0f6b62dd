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
