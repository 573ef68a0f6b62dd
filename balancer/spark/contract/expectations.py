"""The contract's suites and the per-record expectations compiled to Spark, carried through the landing pass.

A suite is a Great Expectations suite in ``lakehouse/expectations/<name>.json``. Its ``records``
expectations of the types in ``_COMPILED`` (GX's semantics: nulls are ignored except by
``not_be_null``) become Spark conditions (``unexpected_condition``). The landing pass carries them as
probe columns, typed by ``IngestProbes``: whether a record was quarantined, the cluster and event time a
quarantined record's JSON names, and one long per ``MASK_BITS`` compiled expectations whose bits say which
of them a valid record fails. ``IngestProbes.summarize`` reduces those columns per cluster in the task
that lands the batch (pure Arrow); ``merge_ingest_summaries`` adds the partials up on the driver.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

from balancer import telemetry as tm
from balancer.resources import resource_root
from balancer.vocabulary import TelemetryFormat

EXPECTATIONS_DIR = resource_root() / "lakehouse" / "expectations"
TELEMETRY_SUITE = "telemetry_v1"
# The ingest suite per source.format.
TELEMETRY_SUITES = {TelemetryFormat.V1: TELEMETRY_SUITE, TelemetryFormat.CRUISE_CONTROL: "telemetry_cc"}
WINDOWS_SUITE = "windows_v1"
# Record expectations compiled to Spark, with the arguments each may have.
_COMPILED = {
    "expect_column_values_to_not_be_null": {"column"},
    "expect_column_values_to_be_in_set": {"column", "value_set"},
    "expect_column_values_to_be_between": {"column", "min_value", "max_value", "strict_min", "strict_max"},
}
# Compiled expectations' verdicts travel as bits of one long per this many expectations (a long has 63
# bits besides its sign; 62 keeps every mask positive).
MASK_BITS = 62


@cache
def suite_json(name: str) -> dict:
    return json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())


def _resolve(value, parameters: dict):
    if isinstance(value, dict) and "$PARAMETER" in value:
        return parameters[value["$PARAMETER"]]
    return value


def unexpected_condition(expectation: dict, parameters: dict) -> Column | None:
    """A Spark condition true on the rows ``expectation`` (a suite's JSON entry) finds unexpected, as
    GX's Spark engine decides it; None when it is not one this module compiles."""
    kind, kwargs = expectation["type"], expectation.get("kwargs", {})
    if kind not in _COMPILED or not set(kwargs) <= _COMPILED[kind] or "column" not in kwargs:
        return None
    column = F.col(kwargs["column"])
    if kind == "expect_column_values_to_not_be_null":
        return column.isNull()
    if kind == "expect_column_values_to_be_in_set":
        values = _resolve(kwargs.get("value_set"), parameters)
        if not isinstance(values, list | tuple | set):
            return None
        return column.isNotNull() & ~column.isin(list(values))
    low, high = _resolve(kwargs.get("min_value"), parameters), _resolve(kwargs.get("max_value"), parameters)
    if low is None and high is None:
        return None  # GX reports it as an error; let GX say so
    inside = F.lit(True)
    if low is not None:
        inside &= (column > F.lit(low)) if kwargs.get("strict_min") else (column >= F.lit(low))
    if high is not None:
        inside &= (column < F.lit(high)) if kwargs.get("strict_max") else (column <= F.lit(high))
    return column.isNotNull() & ~inside


@dataclass(frozen=True)
class CompiledRecords:
    """A suite's ``records`` expectations for one batch's columns: those compiled to Spark conditions
    (``compiled[i]`` is expectation i of the probes' masks), those left to GX, and those naming a column
    the batch lacks."""

    expectations: tuple[dict, ...]
    compiled: tuple[tuple[dict, Column], ...]
    by_gx: tuple[dict, ...]
    missing: tuple[dict, ...]

    @classmethod
    def of(cls, suite: str, columns: Sequence[str], parameters: dict) -> CompiledRecords:
        records = [
            e for e in suite_json(suite)["expectations"] if e.get("meta", {}).get("frame") == "records"
        ]
        compiled, by_gx, missing = [], [], []
        for expectation in records:
            condition = unexpected_condition(expectation, parameters)
            if condition is None:
                by_gx.append(expectation)
            elif expectation["kwargs"]["column"] not in columns:
                missing.append(expectation)
            else:
                compiled.append((expectation, condition))
        return cls(tuple(records), tuple(compiled), tuple(by_gx), tuple(missing))


@dataclass(frozen=True)
class UnexpectedMask:
    """A long probe column: bit ``b`` is set when a valid record is unexpected by compiled expectation
    ``first + b`` (``b < count``)."""

    column: str
    first: int
    count: int


@dataclass(frozen=True)
class IngestProbes:
    """The probe columns the landing pass adds to each record for the ingest contract, and how they are
    reduced. A ``lakehouse.Summarizer``: the landing tasks call it on each Arrow batch (picklable)."""

    masks: tuple[UnexpectedMask, ...] = ()
    quarantined: str = "_bad"  # boolean: the record was quarantined
    named_cluster: str = "_named_cluster"  # a quarantined record's cluster from its JSON, if not typed
    named_ts: str = "_named_ts"  # a quarantined record's event time (epoch ms) from its JSON, if not typed

    @classmethod
    def for_expectations(cls, count: int) -> IngestProbes:
        return cls(
            tuple(
                UnexpectedMask(f"_unexpected{k}", k * MASK_BITS, min(MASK_BITS, count - k * MASK_BITS))
                for k in range((count + MASK_BITS - 1) // MASK_BITS)
            )
        )

    @property
    def expectations(self) -> int:
        return sum(mask.count for mask in self.masks)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The columns ``summarize`` reads."""
        masks = tuple(mask.column for mask in self.masks)
        return ("cluster", "ts", self.quarantined, self.named_cluster, self.named_ts, *masks)

    def __call__(self, batch: pa.RecordBatch) -> pa.Table:
        return self.summarize(batch)

    def spark_columns(self, compiled: Sequence[Column]) -> list[Column]:
        """The probes as Spark columns of the parsed batch (valid and quarantined records), few and narrow
        as they travel to Python with every record; ``compiled[i]`` is expectation i's condition."""
        bad = F.col("quarantine_reason").isNotNull()
        value = F.col("value").cast("string")
        probes = [
            bad.alias(self.quarantined),
            # Valid UTF-8 whatever the value holds: it names a cluster in quality_runs.
            F.when(
                bad & F.col("cluster").isNull(), F.make_valid_utf8(F.get_json_object(value, "$.cluster"))
            ).alias(self.named_cluster),
            F.when(bad & F.col("ts").isNull(), F.get_json_object(value, "$.ts").try_cast("long")).alias(
                self.named_ts
            ),
        ]
        for mask in self.masks:
            bits = F.lit(0).cast("long")
            for bit, condition in enumerate(compiled[mask.first : mask.first + mask.count]):
                bits = bits.bitwiseOR(
                    F.when(~bad & condition, F.lit(1 << bit)).otherwise(F.lit(0)).cast("long")
                )
            probes.append(bits.alias(mask.column))
        return probes

    def summarize(self, batch: pa.RecordBatch) -> pa.Table:
        """Per cluster, one Arrow batch's records reduced: records, quarantined records, event-time span
        and latest valid event time (ms), and per compiled expectation the number of unexpected valid
        records. Partials add up with ``merge_ingest_summaries``."""
        bad = batch.column(self.quarantined)
        # A quarantined record without a typed cluster or event time counts for the ones its JSON names.
        cluster = pc.coalesce(batch.column("cluster"), batch.column(self.named_cluster))
        has_ts = pc.is_valid(batch.column("ts"))
        ts_ms = pa.array(_epoch_ms(batch.column("ts")), mask=pc.invert(has_ts).to_numpy(zero_copy_only=False))
        ts_ms = pc.coalesce(ts_ms, batch.column(self.named_ts))
        # A quarantined record's event time counts only when plausible, by the parser's rule for ts: an
        # absurd one would stretch the batch's span beyond what a datetime holds (and mean nothing).
        plausible = pc.and_(
            pc.greater_equal(ts_ms, tm.MIN_TS_MS),
            pc.less_equal(ts_ms, int(time.time() * 1000) + tm.MAX_CLOCK_SKEW_MS),
        )
        ts_ms = pc.if_else(plausible, ts_ms, pa.scalar(None, pa.int64()))
        columns = {
            "cluster": cluster,
            "records": pa.array(np.ones(batch.num_rows, dtype=np.int64)),
            "quarantined": pc.cast(bad, pa.int64()),
            "first_ts_ms": ts_ms,
            "last_ts_ms": ts_ms,
            "valid_last_ts_ms": pc.if_else(bad, pa.scalar(None, pa.int64()), ts_ms),
        }
        for mask in self.masks:
            bits = pc.fill_null(batch.column(mask.column), 0)
            flagged = pc.max(bits).as_py() or 0
            for bit in range(mask.count):
                # Nearly every batch has no unexpected valid record: its counts are nulls, not columns of 0.
                columns[_count_column(mask.first + bit)] = (
                    pc.cast(pc.not_equal(pc.bit_wise_and(bits, 1 << bit), 0), pa.int64())
                    if flagged
                    else pa.nulls(batch.num_rows, pa.int64())
                )
        return _reduce(pa.table(columns), self.expectations)


def _count_column(expectation: int) -> str:
    """The summary column counting compiled expectation ``expectation``'s unexpected valid records."""
    return f"unexpected_{expectation}"


def _epoch_ms(timestamps: pa.Array) -> np.ndarray:
    """Microsecond timestamps as epoch ms, floored like Spark's ``unix_millis`` (nulls as 0)."""
    return np.floor_divide(pc.fill_null(timestamps.cast(pa.int64()), 0).to_numpy(), 1000)


_SUMMARY_REDUCE = {
    "records": "sum",
    "quarantined": "sum",
    "first_ts_ms": "min",
    "last_ts_ms": "max",
    "valid_last_ts_ms": "max",
}


def _reduce(table: pa.Table, expectations: int) -> pa.Table:
    reduce = {**_SUMMARY_REDUCE, **{_count_column(i): "sum" for i in range(expectations)}}
    grouped = table.group_by("cluster", use_threads=False).aggregate(list(reduce.items()))
    columns = {"cluster": grouped.column("cluster").cast(pa.string())}
    for name, how in reduce.items():
        columns[name] = grouped.column(f"{name}_{how}").cast(pa.int64())
    return pa.table(columns)


@dataclass(frozen=True)
class ClusterIngest:
    """One cluster's records in an ingest batch, as the landing pass reduced them. ``cluster`` None:
    quarantined records that name no cluster. Event times are epoch ms."""

    cluster: str | None
    records: int
    quarantined: int
    first_ts_ms: int | None
    last_ts_ms: int | None
    valid_last_ts_ms: int | None
    unexpected: tuple[int, ...]  # per compiled expectation, its unexpected valid records


def merge_ingest_summaries(summary: pa.Table | None) -> list[ClusterIngest]:
    """``IngestProbes.summarize`` partials (one per task and Arrow batch) added up, one per cluster."""
    if summary is None or summary.num_rows == 0:
        return []
    expectations = summary.num_columns - 1 - len(_SUMMARY_REDUCE)
    rows: list[dict[str, Any]] = _reduce(summary, expectations).to_pylist()
    return [
        ClusterIngest(
            r["cluster"],
            r["records"] or 0,
            r["quarantined"] or 0,
            r["first_ts_ms"],
            r["last_ts_ms"],
            r["valid_last_ts_ms"],
            tuple(r[_count_column(i)] or 0 for i in range(expectations)),
        )
        for r in rows
    ]
