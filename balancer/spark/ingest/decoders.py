"""The product's value decoders, handed to the generic Kafka source (``KafkaSource.decoding``) so that each
record's value is decoded in the reading task, in bulk over its Arrow batch: v1's JSON (column
``value_json``) and Cruise Control's binary metric records (``value_cc``). Each is a frozen, picklable
``ValueDecoder``; ``for_format`` picks the one of a telemetry format."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type
from pyspark.sql.types import StructType

from balancer.vocabulary import TelemetryFormat


@dataclass(frozen=True)
class JsonValues:
    """Values as JSON of ``schema``, by Arrow's JSON reader, or NULL where the reader cannot be sure to agree
    with Spark's ``from_json`` (``json_values``): the parser decodes those rows with ``from_json``."""

    schema: StructType
    column: str = "value_json"
    arrow_type: pa.DataType = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.schema, StructType):
            raise TypeError(f"schema must be a Spark StructType, got {type(self.schema).__name__}")
        object.__setattr__(self, "arrow_type", to_arrow_type(self.schema))

    @property
    def spark_type(self) -> StructType:
        return self.schema

    def decode(self, values: pa.Array) -> pa.Array:
        from balancer.spark.ingest.json_values import decode_json

        return decode_json(values, self.arrow_type)


@dataclass(frozen=True)
class CruiseControlValues:
    """Values as Cruise Control's metric records (``balancer.cruise_control.decode``): one row per value,
    its ``error`` saying why a value is not a valid record."""

    column: str = "value_cc"

    @property
    def arrow_type(self) -> pa.DataType:
        from balancer.cruise_control import CC_VALUE_TYPE

        return CC_VALUE_TYPE

    @property
    def spark_type(self) -> StructType:
        return from_arrow_type(self.arrow_type)

    def decode(self, values: pa.Array) -> pa.Array:
        from balancer.cruise_control import decode

        return decode(values)


def for_format(telemetry: TelemetryFormat) -> JsonValues | CruiseControlValues:
    """The decoder of a telemetry format's values."""
    if telemetry == TelemetryFormat.CRUISE_CONTROL:
        # Binary records decoded by numpy over the Arrow buffers.
        return CruiseControlValues()
    from balancer.spark.ingest.parse import TYPED_SCHEMA

    # JSON decoded by Arrow in the reading task costs less than from_json in the JVM (make bench-landing).
    return JsonValues(TYPED_SCHEMA)
