"""Cruise Control's metrics-reporter records parsed into telemetry rows.

The Kafka source decodes each binary value in its reading task (``balancer.cruise_control.decode``, handed
to it as ``decoders.CruiseControlValues``, column ``value_cc``); here each record gets its telemetry
columns, or a reason and goes to quarantine. A valid record lands in ``telemetry_raw`` as ``v`` 0 (the
reporter's serde version), ``type`` its metric class (broker, topic, partition), ``metric`` its
RawMetricType name and ``metric_value`` its value. How a closed window turns these rows into loads is
``balancer.spark.windows.cc_loads``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from balancer import cruise_control as cc
from balancer import telemetry as tm
from balancer.spark.ingest.parse import TELEMETRY_COLUMNS

CLASSES = ("broker", "topic", "partition")  # metric class ids 0, 1, 2
BYTE_RATES = (
    "ALL_TOPIC_BYTES_IN",
    "ALL_TOPIC_BYTES_OUT",
    "TOPIC_BYTES_IN",
    "TOPIC_BYTES_OUT",
    "ALL_TOPIC_REPLICATION_BYTES_IN",
    "ALL_TOPIC_REPLICATION_BYTES_OUT",
    "TOPIC_REPLICATION_BYTES_IN",
    "TOPIC_REPLICATION_BYTES_OUT",
)


def metric_names() -> list[str]:
    """RawMetricType names by id."""
    return [t.name for t in cc.RAW_METRIC_TYPES]


def _named(names: list[str] | tuple[str, ...], ids: Column) -> Column:
    """The name of each id, NULL for an unknown one (a quarantined record's id may be any signed byte:
    index 0 is an error even for try_element_at, hence the guard)."""
    return F.when(ids >= 0, F.try_element_at(F.array(*(F.lit(n) for n in names)), ids.cast("int") + 1))


def _name_of(ids: Column) -> Column:
    return _named(metric_names(), ids)


def _show(number: Column) -> Column:
    return number.cast("string")


def parse_cruise_control(
    kafka: DataFrame, *, cluster: str, max_value_bytes: int, max_rate: float, max_size: float
) -> DataFrame:
    """Kafka records with the source's ``value_cc`` column → the columns ``parse_telemetry`` gives,
    ``quarantine_reason`` NULL for a valid record. The first failing rule gives the reason."""
    rec = F.col("value_cc")
    value = F.col("value")
    metric = _name_of(rec["metric_type"])
    number = rec["value"]
    now_ms = F.unix_millis(F.current_timestamp())
    plausible = (rec["ts"] >= tm.MIN_TS_MS) & (rec["ts"] <= now_ms + tm.MAX_CLOCK_SKEW_MS)
    reason = F.coalesce(
        F.when(value.isNull() | (F.octet_length(value) == 0), F.lit("empty value")),
        F.when(
            F.octet_length(value) > max_value_bytes,
            F.format_string(
                f"value is %d bytes, over source.max_value_bytes={max_value_bytes}", F.octet_length(value)
            ),
        ),
        F.when(rec.isNull(), F.lit("not decoded as a Cruise Control metric")),
        F.when(
            rec["error"].isNotNull(), F.concat(F.lit("not a Cruise Control metric record: "), rec["error"])
        ),
        F.when(
            ~plausible,
            F.concat(F.lit("time is not a plausible epoch-milliseconds time: "), rec["ts"].cast("string")),
        ),
        F.when(rec["broker"] < 0, F.concat(F.lit("broker id is negative: "), rec["broker"].cast("string"))),
        F.when(
            rec["partition"] < 0, F.concat(F.lit("partition is negative: "), rec["partition"].cast("string"))
        ),
        F.when(
            F.isnan(number) | (F.abs(number) == float("inf")),
            F.concat(F.lit("value of "), metric, F.lit(" is not a finite number")),
        ),
        F.when(number < 0, F.concat(F.lit("value of "), metric, F.lit(" is negative: "), _show(number))),
        F.when(
            metric.isin(*BYTE_RATES) & (number > max_rate),
            F.concat(
                F.lit("value of "),
                metric,
                F.lit(" is "),
                _show(number),
                F.lit(f" B/s, over source.max_rate={max_rate:g}"),
            ),
        ),
        F.when(
            (metric == "PARTITION_SIZE") & (number > max_size),
            F.concat(
                F.lit("value of PARTITION_SIZE is "),
                _show(number),
                F.lit(f" bytes, over source.max_size={max_size:g}"),
            ),
        ),
    )
    schema = _telemetry_types()
    typed = {name: F.lit(None) for name in TELEMETRY_COLUMNS}
    typed.update(
        v=rec["version"],
        type=_named(CLASSES, rec["metric_class"]),
        # Only a plausible time becomes a timestamp: an absurd one would overflow it (and is quarantined).
        ts=F.when(plausible, F.timestamp_millis(rec["ts"])),
        cluster=F.lit(cluster),
        broker=rec["broker"],
        topic=rec["topic"],
        partition=rec["partition"],
        metric=metric,
        metric_value=number,
    )
    parsed = kafka.select(
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        "key",
        "value",
        *(typed[name].cast(schema[name]).alias(name) for name in TELEMETRY_COLUMNS),
        reason.alias("quarantine_reason"),
    )
    # Key and value only where the record is quarantined (kept as it arrived), as parse_telemetry does.
    bad = F.col("quarantine_reason").isNotNull()
    return parsed.select(
        *(F.when(bad, F.col(c)).alias(c) if c in ("key", "value") else c for c in parsed.columns)
    )


def _telemetry_types() -> dict[str, str]:
    from balancer.spark.lakehouse import spark_schema

    fields = {f.name: f.dataType for f in spark_schema("telemetry_raw").fields}
    return {name: fields[name].simpleString() for name in TELEMETRY_COLUMNS}


def with_cruise_control_values(kafka: DataFrame) -> DataFrame:
    """Spark's own Kafka source (the cluster path) gives the raw values only: decode them in one Arrow pass,
    as our source does in its reading task."""
    from balancer.spark.ingest.decoders import CruiseControlValues

    decoder = CruiseControlValues()
    schema = T.StructType(kafka.schema.fields + [T.StructField(decoder.column, decoder.spark_type)])

    def decode(batches):
        for batch in batches:
            yield batch.append_column(decoder.column, decoder.decode(batch.column("value")))

    return kafka.mapInArrow(decode, schema)
