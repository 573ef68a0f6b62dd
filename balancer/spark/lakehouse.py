"""The Delta tables: schemas from ``lakehouse/tables/*.sql``, idempotent appends, reads through the log.

Two engines, one interface:

- ``delta-rs`` (embedded default): writes Arrow with ``write_deltalake``; reads back into Spark
  from the table's active file list (``DeltaTable.file_uris()``), never by globbing parquet.
- ``delta-spark`` (cluster path): ``format("delta")``, needs Delta's jar on the classpath.

Appends are idempotent per (app_id, batch_id), so a micro-batch replayed after a crash
writes nothing twice. delta-rs does not skip a duplicate transaction by itself, so we
check ``transaction_version(app_id)`` first and record the new one in the same commit.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from balancer.config import REPO_ROOT
from balancer.spark.session import delta_jar_available

TABLES_DIR = REPO_ROOT / "lakehouse" / "tables"
_COLUMNS = re.compile(r"CREATE TABLE IF NOT EXISTS\s+(\w+)\s*\((.*)\)\s*USING DELTA", re.S | re.I)


@cache
def table_ddl() -> dict[str, str]:
    """Table name → its column list in Spark DDL, read from lakehouse/tables/<name>.sql."""
    tables = {}
    for path in sorted(TABLES_DIR.glob("*.sql")):
        body = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("--"))
        match = _COLUMNS.search(body)
        if not match:
            raise ValueError(f"{path}: expected 'CREATE TABLE IF NOT EXISTS name (...) USING DELTA'")
        tables[match.group(1)] = " ".join(match.group(2).split())
    return tables


TABLES = tuple(table_ddl())


_SCALARS = {"STRING": T.StringType(), "INT": T.IntegerType(), "BIGINT": T.LongType(), "DOUBLE": T.DoubleType(),
            "BOOLEAN": T.BooleanType(), "TIMESTAMP": T.TimestampType(), "BINARY": T.BinaryType()}
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


class Lakehouse:
    """The balancer's tables under one root folder (one sub-folder per table)."""

    def __init__(self, spark: SparkSession, root: str | Path, *, engine: str = "auto"):
        if engine not in ("auto", "delta-rs", "delta-spark"):
            raise ValueError(f"engine must be 'auto', 'delta-rs' or 'delta-spark', got {engine!r}")
        if engine == "auto":
            engine = "delta-spark" if delta_jar_available(spark) else "delta-rs"
        elif engine == "delta-spark" and not delta_jar_available(spark):
            raise RuntimeError("lakehouse.engine is 'delta-spark' but Delta's jar is not on the Spark classpath; "
                               "submit with spark-submit.sh (it passes --packages io.delta:delta-spark_2.13) "
                               "or set lakehouse.engine=delta-rs")
        self.spark = spark
        self.root = Path(root).resolve()
        self.engine = engine

    def path(self, table: str) -> str:
        if table not in table_ddl():
            raise KeyError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return str(self.root / table)

    def create_all(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for table in TABLES:
            if self.engine == "delta-rs":
                DeltaTable.create(self.path(table), schema=arrow_schema(table), mode="ignore", name=table)
            else:
                self.spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{self.path(table)}` ({table_ddl()[table]}) USING DELTA")

    # -- writes ---------------------------------------------------------------------------

    def committed_version(self, table: str, app_id: str) -> int | None:
        """Highest batch id committed to ``table`` by ``app_id``, or None."""
        if self.engine == "delta-rs":
            return DeltaTable(self.path(table)).transaction_version(app_id)
        rows = self.spark.sql(f"DESCRIBE HISTORY delta.`{self.path(table)}`").select("operationParameters").collect()
        versions = [int(r[0].get("txnVersion", -1)) for r in rows if r[0] and r[0].get("txnAppId") == app_id]
        return max(versions) if versions else None

    def append(self, table: str, data: DataFrame | pa.Table, *, app_id: str, batch_id: int) -> bool:
        """Append once per (app_id, batch_id); returns False when that batch was already committed."""
        if self.engine == "delta-spark":
            frame = data if isinstance(data, DataFrame) else self.spark.createDataFrame(data.to_pandas(),
                                                                                          spark_schema(table))
            # Delta skips a (txnAppId, txnVersion) it has already seen: idempotent by itself.
            (frame.select(*spark_schema(table).names).write.format("delta").mode("append")
             .option("txnAppId", app_id).option("txnVersion", batch_id).save(self.path(table)))
            return True
        delta = DeltaTable(self.path(table))
        done = delta.transaction_version(app_id)
        if done is not None and done >= batch_id:
            return False
        arrow = data.toArrow() if isinstance(data, DataFrame) else data
        arrow = conform(arrow, arrow_schema(table), table)
        write_deltalake(delta, arrow, mode="append",
                        commit_properties=CommitProperties(app_transactions=[Transaction(app_id, batch_id)]))
        return True

    # -- reads ----------------------------------------------------------------------------

    def read(self, table: str) -> DataFrame:
        if self.engine == "delta-spark":
            return self.spark.read.format("delta").load(self.path(table))
        schema = spark_schema(table)
        path = self.path(table)
        if not DeltaTable.is_deltatable(path):
            return self.spark.createDataFrame([], schema)
        files = DeltaTable(path).file_uris()
        if not files:
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(*files)

    def register_views(self) -> list[str]:
        """Temp views named like the tables, so SQL can say ``FROM balance_plans``."""
        for table in TABLES:
            self.read(table).createOrReplaceTempView(table)
        return list(TABLES)


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
