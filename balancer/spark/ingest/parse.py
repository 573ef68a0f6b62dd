"""Parse telemetry v1 from Kafka records in the JVM, attaching a reason to every bad record.

One typed ``from_json`` pass over every value, except where the source already decoded it
(column ``value_json``, see ``balancer.spark.ingest.json_values``: identical to what ``from_json``
gives, NULL where the source left it to Spark). Only where the typed pass fails (not JSON, or a field of
the wrong type) does a second pass read every field as a string, to say which field was
wrong and what it held; for the rest, those texts come from the typed values. The first
failing rule gives the reason; valid records have ``quarantine_reason`` NULL. Nothing is
dropped.

The ~70 rules run only where a cheap guard cannot show the record is valid: one boolean over
the typed fields, TRUE for the usual fully valid record (see ``_valid_guard``).
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from balancer import telemetry as tm

_SPARK_TYPES = {
    "int": T.IntegerType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "bool": T.BooleanType(),
    "string": T.StringType(),
    "int_array": T.ArrayType(T.IntegerType()),
    "capacity": T.StructType([T.StructField(k, T.DoubleType()) for k in tm.CAPACITY_KEYS]),
}
_TYPE_WORDS = {
    "int": "an integer",
    "long": "an integer",
    "double": "a number",
    "bool": "true or false",
    "string": "a string",
    "int_array": "an array of integers",
    "capacity": "an object {network_in, network_out, disk} of numbers",
}
_CORRUPT = "_corrupt_record"

RAW_SCHEMA = T.StructType(
    [T.StructField(f.name, T.StringType()) for f in tm.FIELDS] + [T.StructField(_CORRUPT, T.StringType())]
)
TYPED_SCHEMA = T.StructType(
    [T.StructField(f.name, _SPARK_TYPES[f.type]) for f in tm.FIELDS]
    + [T.StructField(_CORRUPT, T.StringType())]
)

# Largest |epoch ms| whose microseconds fit a long (Spark's timestamp): beyond it timestamp_millis overflows.
_TS_MS_LIMIT = (2**63 - 1) // 1000

KAFKA_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp")


def _show(raw: Column) -> Column:
    """A bad value as the reason quotes it: at most 80 characters."""
    return F.when(F.length(raw) > 80, F.concat(F.substring(raw, 1, 77), F.lit("..."))).otherwise(raw)


# Physical bounds, by unit: a rate is at most source.max_rate (a message is at least one byte, so
# messages/s are bounded by it too) and a size at most source.max_size.
_LIMITS = {
    "bytes_in": ("max_rate", "B/s"),
    "bytes_out": ("max_rate", "B/s"),
    "messages_in": ("max_rate", "messages/s"),
    "size": ("max_size", "B"),
    "capacity.network_in": ("max_rate", "B/s"),
    "capacity.network_out": ("max_rate", "B/s"),
    "capacity.disk": ("max_size", "B"),
}


def _first_invalid_byte(value: Column) -> Column:
    """Offset of the first byte of ``value`` (text) that is not valid UTF-8. ``make_valid_utf8`` keeps a
    valid prefix byte for byte and replaces each invalid sequence by U+FFFD; a U+FFFD the value itself
    holds is first masked by three ASCII bytes (its own length), so the first U+FFFD left is the first
    error."""
    marked = F.make_valid_utf8(F.replace(value, F.lit("\ufffd"), F.lit("???")))
    return F.octet_length(F.substring_index(marked, "\ufffd", 1))


def _single_json_value(value: Column) -> Column:
    """TRUE when ``value`` holds exactly one JSON value and nothing after it but whitespace.

    ``from_json`` reads the first value and ignores what follows (``{...}garbage`` parses), and so do
    Spark's other JSON functions. ``json_array_length`` counts elements up to the array's closing bracket:
    ``[v]`` has one element only if ``v`` is one value, optionally followed by ``]`` and anything; ``[v,0]``
    has two only if ``v`` is one value not followed by ``]``. Both hold only when nothing follows the value.
    """
    wrapped_one = F.json_array_length(F.concat(F.lit("["), value, F.lit("]")))
    wrapped_two = F.json_array_length(F.concat(F.lit("["), value, F.lit(",0]")))
    # NULL (not JSON at all) counts as not single.
    return F.coalesce((wrapped_one == 1) & (wrapped_two == 2), F.lit(False))


def quarantine_rules(
    raw: Column,
    typed: Column,
    value: Column,
    max_value_bytes: int,
    now_ms: Column,
    *,
    max_rate: float,
    max_size: float,
    single: Column | None = None,
) -> list[Column]:
    """Ordered (condition → reason) checks; the first that fires names the problem.

    ``raw`` (every field as text) is NULL where the typed pass succeeded: there a field is
    present when its typed value is, and its text is made only inside a reason that fires.
    ``value`` is the record's value as text. It is checked for UTF-8 before anything quotes it: a
    reason never carries invalid UTF-8, and neither does a valid record's string field (Spark's
    ``from_json`` accepts invalid bytes inside JSON strings, so the typed pass alone cannot tell).
    """
    limits = {"max_rate": max_rate, "max_size": max_size}

    def over_limit(name: str, x: Column, shown: Column) -> Column:
        key, unit = _LIMITS[name]
        return F.when(
            x > limits[key],
            F.concat(
                F.lit(f"field '{name}' is "),
                _show(shown),
                F.lit(f" {unit}, over source.{key}={limits[key]:g}"),
            ),
        )

    explained = raw.isNotNull()

    def present(name: str) -> Column:
        return F.when(explained, raw[name].isNotNull()).otherwise(typed[name].isNotNull())

    def text(name: str) -> Column:
        return F.when(explained, raw[name]).otherwise(typed[name].cast("string"))

    rtype = F.when(explained, raw["type"]).otherwise(typed["type"])
    rules = [
        F.when(value.isNull() | (F.length(value) == 0), F.lit("empty value")),
        F.when(
            F.octet_length(value) > max_value_bytes,
            F.format_string(
                f"value is %d bytes, over source.max_value_bytes={max_value_bytes}", F.octet_length(value)
            ),
        ),
        F.when(
            ~F.is_valid_utf8(value),
            F.format_string("value is not valid UTF-8 at byte offset %d", _first_invalid_byte(value)),
        ),
        F.when(
            typed.isNull() | explained & raw[_CORRUPT].isNotNull(),
            F.concat(F.lit("not a JSON object: "), _show(value)),
        ),
        F.when(~present("v"), F.lit("missing field 'v' (telemetry version)")),
        F.when(
            typed["v"].isNull() | (typed["v"] != tm.VERSION),
            F.concat(
                F.lit("unknown telemetry version v="),
                _show(text("v")),
                F.lit(f" (this job reads v={tm.VERSION})"),
            ),
        ),
        F.when(rtype.isNull(), F.lit("missing field 'type'")),
        F.when(
            ~rtype.isin(*tm.RECORD_TYPES),
            F.concat(F.lit("unknown type '"), _show(rtype), F.lit("' (expected 'partition' or 'broker')")),
        ),
    ]
    for field in tm.FIELDS:
        if field.required_for:
            rules.append(
                F.when(
                    rtype.isin(*field.required_for) & ~present(field.name),
                    F.concat(F.lit(f"missing field '{field.name}' for a "), rtype, F.lit(" record")),
                )
            )
    for field in tm.FIELDS:
        # A wrong type is only possible where the typed pass failed, i.e. where raw was read.
        rules.append(
            F.when(
                explained & raw[field.name].isNotNull() & typed[field.name].isNull(),
                F.concat(
                    F.lit(f"field '{field.name}' must be {_TYPE_WORDS[field.type]}, got "),
                    _show(raw[field.name]),
                ),
            )
        )
        if field.type == "capacity":
            for key in tm.CAPACITY_KEYS:
                sub = typed[field.name][key]
                rules.append(
                    F.when(
                        typed[field.name].isNotNull() & sub.isNull(),
                        F.lit(f"field 'capacity.{key}' is missing or not a number"),
                    )
                )
                rules.append(
                    F.when(
                        F.isnan(sub) | (F.abs(sub) == float("inf")),
                        F.lit(f"field 'capacity.{key}' is not a finite number"),
                    )
                )
                rules.append(
                    F.when(
                        sub <= 0,
                        F.concat(F.lit(f"field 'capacity.{key}' must be positive, got "), sub.cast("string")),
                    )
                )
                rules.append(over_limit(f"capacity.{key}", sub, sub.cast("string")))
        if field.type == "double":
            rules.append(
                F.when(
                    F.isnan(typed[field.name]) | (F.abs(typed[field.name]) == float("inf")),
                    F.lit(f"field '{field.name}' is not a finite number"),
                )
            )
        if field.non_negative:
            rules.append(
                F.when(
                    typed[field.name] < 0,
                    F.concat(F.lit(f"field '{field.name}' is negative: "), _show(text(field.name))),
                )
            )
        if field.name in _LIMITS:
            rules.append(over_limit(field.name, typed[field.name], text(field.name)))
    ts = typed["ts"]
    rules += [
        F.when(
            (ts < tm.MIN_TS_MS) | (ts > now_ms + tm.MAX_CLOCK_SKEW_MS),
            F.concat(F.lit("field 'ts' is not a plausible epoch-milliseconds time: "), text("ts")),
        ),
        F.when(F.trim(typed["cluster"]) == "", F.lit("field 'cluster' is empty")),
        F.when(
            (rtype == "partition") & ~typed["topic"].rlike(tm.TOPIC_NAME_PATTERN),
            F.concat(F.lit("field 'topic' is not a valid Kafka topic name: "), _show(text("topic"))),
        ),
        F.when((rtype == "partition") & (F.size(typed["replicas"]) == 0), F.lit("field 'replicas' is empty")),
        F.when(
            (rtype == "partition") & F.exists(typed["replicas"], lambda r: r.isNull() | (r < 0)),
            F.concat(F.lit("field 'replicas' holds an invalid broker id: "), text("replicas")),
        ),
        F.when(
            (rtype == "partition")
            & (F.size(F.array_distinct(typed["replicas"])) != F.size(typed["replicas"])),
            F.concat(F.lit("field 'replicas' lists a broker twice: "), text("replicas")),
        ),
        F.when(
            (rtype == "partition") & ~F.array_contains(typed["replicas"], typed["broker"]),
            F.concat(
                F.lit("broker "),
                typed["broker"].cast("string"),
                F.lit(" reports a replica but is not in replicas "),
                text("replicas"),
            ),
        ),
    ]
    # parse_telemetry passes it; a caller that already knows each value is one JSON value may leave it out.
    if single is not None:
        rules.append(F.when(~single, F.concat(F.lit("bytes after the JSON object: "), _show(value))))
    return rules


def _valid_guard(typed: Column, now_ms: Column, *, max_rate: float, max_size: float) -> Column:
    """TRUE only when none of ``quarantine_rules`` can fire: the typed pass succeeded (so the value is valid
    UTF-8: no other is parsed) and every field is present where required and in range. It must never
    be TRUE for a bad record; FALSE or NULL for a good one only costs time (the rules then run and
    find nothing).

    Cheaper than the rules (`make bench-parse` prints the JVM CPU per record of both designs)
    because it reads the typed values directly, with no per-field CASE on which pass explained
    the record, and needs one or two comparisons per field (``x >= 0 AND x <= max`` also
    rejects NaN, which Spark orders above +inf). NULL-safe by construction: a check on an
    absent value is NULL, and NULL is not TRUE.
    """
    return functools.reduce(
        lambda a, b: a & b, _valid_conditions(typed, now_ms, max_rate=max_rate, max_size=max_size)
    )


def _valid_conditions(typed: Column, now_ms: Column, *, max_rate: float, max_size: float) -> list[Column]:
    """One condition per rule group of ``quarantine_rules``, each TRUE only when that group finds nothing."""
    rtype = typed["type"]
    inf = float("inf")
    limits = {"max_rate": max_rate, "max_size": max_size}

    def most(name: str) -> float:
        return limits[_LIMITS[name][0]] if name in _LIMITS else inf

    conds = [
        typed.isNotNull(),
        typed[_CORRUPT].isNull(),
        typed["v"] == tm.VERSION,
        rtype.isin(*tm.RECORD_TYPES),
    ]
    for field in tm.FIELDS:
        x = typed[field.name]
        if field.type == "capacity":
            ok = None
            for key in tm.CAPACITY_KEYS:
                sub = (x[key] > 0) & (x[key] <= most(f"capacity.{key}"))
                ok = sub if ok is None else ok & sub
        elif field.type == "double":
            # x <= bound (finite) also rejects +inf and NaN; without a bound, x < inf does.
            bound = most(field.name)
            below = x <= bound if bound < inf else x < inf
            ok = (x >= 0) & below if field.non_negative else ~F.isnan(x) & (F.abs(x) != inf) & below
        elif field.non_negative:
            ok = x >= 0
        else:
            ok = x.isNotNull()
        if set(field.required_for) == set(tm.RECORD_TYPES):
            conds.append(ok)  # NULL when absent: not TRUE
        elif field.required_for:
            conds.append(F.when(rtype.isin(*field.required_for), ok).otherwise(x.isNull() | ok))
        elif field.type in ("capacity", "double") or field.non_negative:
            conds.append(x.isNull() | ok)
    ts, replicas = typed["ts"], typed["replicas"]
    conds += [
        (ts >= tm.MIN_TS_MS) & (ts <= now_ms + tm.MAX_CLOCK_SKEW_MS),
        F.trim(typed["cluster"]) != "",
        # No lambda (F.exists): higher-order functions are not code-generated, and one here costs
        # a large share of the parse.
        (rtype != "partition")
        | (
            typed["topic"].rlike(tm.TOPIC_NAME_PATTERN)
            & (F.size(replicas) > 0)
            # No NULL id. Not array_compact: it is a filter() with a lambda.
            # arrays_overlap is NULL when a NULL is in the array and nothing overlaps.
            & (F.arrays_overlap(replicas, F.array(F.lit(-1))) == F.lit(False))
            & (F.array_min(replicas) >= 0)
            & (F.size(F.array_distinct(replicas)) == F.size(replicas))
            & F.array_contains(replicas, typed["broker"])
        ),
    ]
    return conds


def parse_telemetry(kafka: DataFrame, *, max_value_bytes: int, max_rate: float, max_size: float) -> DataFrame:
    """Kafka records (key, value, topic, partition, offset, timestamp[, value_json]) → telemetry
    columns, Kafka coordinates, ``quarantine_reason`` (NULL when valid), and the record's key and
    value (binary) as they arrived where it is quarantined (NULL where it is valid).

    Every string column holds valid UTF-8: only a value that is valid UTF-8 is parsed (Spark's
    ``from_json`` would read invalid bytes inside a JSON string into the field as they are); any other
    is quarantined by the UTF-8 rule, with no fields."""
    value = F.col("value").cast("string")
    # Parse the value only when it is within bounds (an oversized value is not worth parsing) and UTF-8.
    # The source decodes only values that are valid UTF-8 throughout (balancer.spark.ingest.json_values), so
    # with value_json this check runs only on the rows it left to Spark.
    within_bounds = F.octet_length(F.col("value")) <= max_value_bytes
    guarded = F.when(within_bounds & F.is_valid_utf8(value), value)
    typed_value = F.from_json(
        guarded, TYPED_SCHEMA, {"columnNameOfCorruptRecord": _CORRUPT, "allowNonNumericNumbers": "true"}
    )
    if "value_json" in kafka.columns:
        # CASE WHEN evaluates from_json only for the rows the source did not decode.
        typed_value = F.when(within_bounds & F.col("value_json").isNotNull(), F.col("value_json")).otherwise(
            typed_value
        )
    parsed = kafka.select(
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key"),
        F.col("value"),
        typed_value.alias("_typed"),
        *([F.col("value_json").isNotNull().alias("_decoded")] if "value_json" in kafka.columns else []),
    )
    typed = F.col("_typed")
    # The all-string pass costs as much as the typed one; CASE WHEN runs it only where that failed.
    typed_failed = typed.isNull() | typed[_CORRUPT].isNotNull()
    parsed = parsed.withColumn(
        "_raw",
        F.when(typed_failed, F.from_json(guarded, RAW_SCHEMA, {"columnNameOfCorruptRecord": _CORRUPT})),
    )
    now_ms = F.unix_millis(F.current_timestamp())
    # A value the source decoded is one JSON value by construction (json_values wraps it); any other is
    # checked for bytes after its object.
    single = _single_json_value(F.col("value").cast("string"))
    if "value_json" in kafka.columns:
        single = F.col("_decoded") | single
    guard = _valid_guard(typed, now_ms, max_rate=max_rate, max_size=max_size) & single
    reason = F.when(guard, F.lit(None).cast("string")).otherwise(
        F.coalesce(
            *quarantine_rules(
                F.col("_raw"),
                typed,
                F.col("value").cast("string"),
                max_value_bytes,
                now_ms,
                max_rate=max_rate,
                max_size=max_size,
                single=single,
            )
        )
    )
    parsed = parsed.select(
        *KAFKA_COLUMNS,
        "key",
        "value",
        typed["v"].alias("v"),
        typed["type"].alias("type"),
        # An absurd ts (quarantined by its rule) must not overflow the timestamp's microseconds and fail the
        # task.
        F.when(typed["ts"].between(-_TS_MS_LIMIT, _TS_MS_LIMIT), F.timestamp_millis(typed["ts"])).alias("ts"),
        *(typed[f.name].alias(f.name) for f in tm.FIELDS if f.name not in ("v", "type", "ts", "capacity")),
        *(typed["capacity"][k].alias(f"capacity_{k}") for k in tm.CAPACITY_KEYS),
        # Cruise Control's records only (balancer.spark.ingest.cc_records).
        F.lit(None).cast("string").alias("metric"),
        F.lit(None).cast("double").alias("metric_value"),
        reason.alias("quarantine_reason"),
    )
    # Key and value only where the record is quarantined (kept as it arrived): a valid record is kept as
    # its typed columns: carrying the raw bytes of every record (a few hundred each) slows parse + batch
    # cache.
    bad = F.col("quarantine_reason").isNotNull()
    return parsed.select(
        *(F.when(bad, F.col(c)).alias(c) if c in ("key", "value") else c for c in parsed.columns)
    )


TELEMETRY_COLUMNS = (
    "v",
    "type",
    "ts",
    "cluster",
    "broker",
    "topic",
    "partition",
    "leader",
    "replicas",
    "bytes_in",
    "bytes_out",
    "messages_in",
    "size",
    "rack",
    "cpu",
    "capacity_network_in",
    "capacity_network_out",
    "capacity_disk",
    "metric",
    "metric_value",
)


def valid_records(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("quarantine_reason").isNull()).select(*KAFKA_COLUMNS, *TELEMETRY_COLUMNS)


def quarantined_records(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("quarantine_reason").isNotNull()).select(
        *KAFKA_COLUMNS, F.col("key"), F.col("value"), F.col("quarantine_reason").alias("reason")
    )
