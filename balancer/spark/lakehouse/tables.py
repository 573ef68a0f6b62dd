"""The tables' schemas, from their DDL in ``lakehouse/tables/*.sql``: Spark's and Arrow's, parsed here
without a JVM so that Python workers (``applyInPandas``, ``mapInArrow``) have them too."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from balancer.resources import sql_files

if TYPE_CHECKING:
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


def create_table(storage: Storage, table: str, properties: Mapping[str, str]) -> None:
    """Create ``table`` under ``storage``'s root if missing, with its DDL's columns and ``properties``; give
    an existing one the properties that differ and the DDL's columns it lacks (nullable: older rows read
    null). Both engines create their tables here, with delta-rs: one commit each, no Spark job. Spark's
    CREATE TABLE on a new object-store root cost seconds per table (S3A round trips and a cold JVM), and
    its tables are the same Delta protocol; the writes that follow are each engine's own."""
    from deltalake import DeltaTable
    from deltalake.schema import Field

    delta = DeltaTable.create(
        storage.join(table),
        schema=arrow_schema(table),
        mode="ignore",
        name=table,
        configuration=dict(properties),
        storage_options=storage.delta_options(),
    )
    current = delta.metadata().configuration
    if any(current.get(key) != value for key, value in properties.items()):
        delta.alter.set_table_properties(dict(properties))
    have = set(delta.schema().to_arrow().names)
    added = [Field.from_arrow(f) for f in arrow_schema(table) if f.name not in have]
    if added:
        delta.alter.add_columns(added)
