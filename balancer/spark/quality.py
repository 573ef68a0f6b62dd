"""The telemetry data contract: Great Expectations suites from ``lakehouse/expectations``, checked on
every micro-batch; results land in ``quality_runs``.

- Ingest: ``telemetry_v1``. Its ``records`` expectations hold for each of the batch's valid records
  (required fields, value ranges); its ``clusters`` ones for one row per cluster in the batch (share of
  quarantined records). A failing cluster's run is recorded with the event-time span of its records.
- Balance: ``windows_v1`` on one row per (cluster, window, broker). Failures name their cluster,
  window and broker through GX's unexpected index rows. A window fails when ``windows_v1`` fails for
  it, or when a failed ingest run of its cluster overlaps it; such windows are returned as
  ``blocked`` and get a ``skipped`` plan.

Cost: a bounded, small number of Spark jobs per call, whatever the suites hold. GX's Spark engine
runs every metric of every expectation as its own Spark job (13 jobs per ingest batch and 26 per
set of windows, 5–35 s under load: benchmarks/README.md, "Data contract cost"), so:

- the per-record expectations (``not_be_null``, ``be_in_set``, ``be_between``, GX's semantics:
  nulls are ignored except by ``not_be_null``) are compiled into Spark conditions, carried as bits of
  one long column per 62 expectations (``Contract.ingest_probes``), and reduced per cluster with the
  cluster's quarantined records and event-time span (``summarize_ingest``, Arrow) in the same pass
  that lands the batch, so no Spark job of its own: per expectation, the number of unexpected
  records; only when some are, one aggregation takes the smallest and largest unexpected value of
  each failed expectation (the sample);
- the per-cluster and per-window frames are built by ONE Spark aggregation each, collected (a few
  hundred rows), and validated by GX on pandas, which starts no Spark job;
- the ingest verdicts a window waits for are read from ``quality_runs`` by file statistics on
  delta-rs (no Spark job), or one filtered Spark read on delta-spark.

A records expectation of any other type, or with other arguments (``mostly``, ``row_condition``), is
validated by GX on Spark as before: slower, but never skipped.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import uuid
from datetime import UTC, datetime
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from balancer import telemetry as tm
from balancer.config import QualityConfig, duration_seconds
from balancer.resources import resource_root
from balancer.spark.lakehouse import Lakehouse, arrow_schema
from balancer.spark.loads import PARTITION_KEYS, WINDOW_KEYS

log = logging.getLogger(__name__)

EXPECTATIONS_DIR = resource_root() / "lakehouse" / "expectations"
TELEMETRY_SUITE = "telemetry_v1"
# The ingest suite per source.format.
TELEMETRY_SUITES = {"v1": TELEMETRY_SUITE, "cruise-control": "telemetry_cc"}
WINDOWS_SUITE = "windows_v1"
# Row-level failures GX validates on Spark (unsupported expectations only) are attributed to
# clusters from this many unexpected rows: a COMPLETE list would pull every bad record to the driver.
PARTIAL_ROWS = 200
_NAMESPACE = uuid.UUID("0c3e5b7a-4f0e-4a43-9d3c-7f0b6f1e2a55")
_WINDOW_INDEX = ["cluster", "window_start_ms", "window_end_ms", "broker"]
# Record expectations compiled to Spark, with the arguments each may have.
_COMPILED = {
    "expect_column_values_to_not_be_null": {"column"},
    "expect_column_values_to_be_in_set": {"column", "value_set"},
    "expect_column_values_to_be_between": {"column", "min_value", "max_value", "strict_min", "strict_max"},
}


@cache
def suite_json(name: str) -> dict:
    return json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())


def _gx():
    # Before the import: GX reads it at import time. No usage analytics leave the job.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx

    return gx


def load_suite(name: str, frame: str | None = None):
    """The suite as a GX ExpectationSuite; ``frame`` keeps only expectations whose meta.frame matches."""
    from great_expectations.core import ExpectationSuite

    spec = dict(suite_json(name))
    if frame is not None:
        spec["expectations"] = [e for e in spec["expectations"] if e.get("meta", {}).get("frame") == frame]
        spec["name"] = f"{name}.{frame}"
    _gx()
    return ExpectationSuite(**spec)


def _ms(column: str):
    return F.unix_millis(F.col(column))


def _to_dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


def _py(value):
    """A plain Python value for JSON and keys: numpy scalars unwrapped, NaN (pandas' missing) as None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _describe(result) -> tuple[str, str, str]:
    """(expectation type, column, what it says) for a GX expectation result."""
    config = result.expectation_config
    return config.type, config.kwargs.get("column", ""), (config.meta or {}).get("says", config.type)


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


_SUMMARY_LONGS = ("records", "quarantined", "first_ts_ms", "last_ts_ms", "valid_last_ts_ms")
_SUMMARY_REDUCE = {
    "records": "sum",
    "quarantined": "sum",
    "first_ts_ms": "min",
    "last_ts_ms": "max",
    "valid_last_ts_ms": "max",
}
# Compiled expectations' verdicts travel as bits of one long per this many expectations.
_BITS = 62


def _epoch_ms(timestamps: pa.Array) -> np.ndarray:
    """Microsecond timestamps as epoch ms, floored like Spark's ``unix_millis`` (nulls as 0)."""
    return np.floor_divide(pc.fill_null(timestamps.cast(pa.int64()), 0).to_numpy(), 1000)


def summarize_ingest(batch: pa.RecordBatch) -> pa.Table:
    """Per cluster, one Arrow batch's records reduced, with the columns ``Contract.ingest_probes`` added:
    records, quarantined records, event-time span and latest valid event time (ms), and per compiled
    expectation ``_n{i}`` the number of unexpected valid records. Partials add up with
    ``merge_ingest_summaries``. Pure Arrow: runs in the Python task that lands the batch."""
    bad = batch.column("_bad")
    # A quarantined record without a typed cluster or event time counts for the ones its JSON names.
    cluster = pc.coalesce(batch.column("cluster"), batch.column("_named_cluster"))
    has_ts = pc.is_valid(batch.column("ts"))
    ts_ms = pa.array(_epoch_ms(batch.column("ts")), mask=pc.invert(has_ts).to_numpy(zero_copy_only=False))
    ts_ms = pc.coalesce(ts_ms, batch.column("_named_ts"))
    # A quarantined record's event time counts only when plausible, by the parser's rule for ts: an absurd
    # one would stretch the batch's span beyond what a datetime holds (and mean nothing).
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
    checks = []
    for name in sorted(
        (n for n in batch.schema.names if n.startswith("_unexpected")), key=lambda n: int(n[11:])
    ):
        masks = pc.fill_null(batch.column(name), 0)
        base = int(name[11:]) * _BITS
        flagged = pc.max(masks).as_py() or 0
        for bit in range(_BITS):
            checks.append(f"_n{base + bit}")
            # Nearly every batch has no unexpected valid record: its counts are zeros, not 62 columns.
            columns[checks[-1]] = (
                pc.cast(pc.not_equal(pc.bit_wise_and(masks, 1 << bit), 0), pa.int64())
                if flagged
                else pa.nulls(batch.num_rows, pa.int64())
            )
    return _reduce(pa.table(columns), checks)


def _summarize_batches(batches):
    for batch in batches:
        yield from summarize_ingest(batch).to_batches()


def _reduce(table: pa.Table, checks: list[str]) -> pa.Table:
    reduce = {**_SUMMARY_REDUCE, **{name: "sum" for name in checks}}
    grouped = table.group_by("cluster", use_threads=False).aggregate(
        [(name, how) for name, how in reduce.items()]
    )
    columns = {"cluster": grouped.column("cluster").cast(pa.string())}
    for name, how in reduce.items():
        columns[name] = grouped.column(f"{name}_{how}").cast(pa.int64())
    return pa.table(columns)


def merge_ingest_summaries(summary: pa.Table | None) -> list[dict]:
    """``summarize_ingest`` partials (one per task and Arrow batch) added up: one dict per cluster."""
    if summary is None or summary.num_rows == 0:
        return []
    checks = [name for name in summary.column_names if name.startswith("_n")]
    rows = _reduce(summary, checks).to_pylist()
    return [{**r, **{name: r[name] or 0 for name in ("records", "quarantined", *checks)}} for r in rows]


class Contract:
    """Runs the suites for one sink. GX is imported and set up on first use, once."""

    def __init__(
        self, lakehouse: Lakehouse, quality: QualityConfig, *, telemetry_suite: str = TELEMETRY_SUITE
    ):
        self.lakehouse = lakehouse
        self.telemetry_suite = telemetry_suite
        self.quality = quality
        self.enabled = quality.enabled
        self.parameters = {
            "max_quarantine_share": quality.max_quarantine_share,
            "min_broker_coverage": quality.min_broker_coverage,
            "max_report_age_seconds": duration_seconds(quality.max_report_age),
        }
        self._context = None
        self._definitions: dict[str, object] = {}
        self._suites: dict[str, object] = {}

    # -- GX plumbing ------------------------------------------------------------------------

    def _definition(self, engine: str = "spark"):
        """GX's batch definition for a whole Spark (``spark``) or pandas (``pandas``) DataFrame."""
        if engine not in self._definitions:
            gx = _gx()
            if self._context is None:
                from great_expectations.data_context.types.base import ProgressBarsConfig

                self._context = gx.get_context(mode="ephemeral")
                self._context.variables.progress_bars = ProgressBarsConfig(
                    globally=False, metric_calculations=False
                )
            if engine == "spark":
                # persist=False: GX would cache every frame it is given and never release it.
                source = self._context.data_sources.add_spark(name="balancer", persist=False)
            else:
                source = self._context.data_sources.add_pandas(name="balancer-small")
            asset = source.add_dataframe_asset(name="contract")
            self._definitions[engine] = asset.add_batch_definition_whole_dataframe("micro_batch")
        return self._definitions[engine]

    def _suite(self, name: str, frame: str | None = None):
        key = f"{name}.{frame}"
        if key not in self._suites:
            self._suites[key] = load_suite(name, frame)
        return self._suites[key]

    def validate(self, suite, frame, result_format):
        """GX validation of a Spark DataFrame, or of a pandas one (small frames: no Spark job)."""
        engine = "spark" if isinstance(frame, DataFrame) else "pandas"
        batch = self._definition(engine).get_batch(batch_parameters={"dataframe": frame})
        return batch.validate(suite, result_format=result_format, expectation_parameters=self.parameters)

    # -- ingest -----------------------------------------------------------------------------

    def check_ingest(
        self,
        parsed: DataFrame,
        valid: DataFrame,
        *,
        app_id: str,
        batch_id: int,
        per_cluster: list[dict] | None = None,
    ) -> list[dict]:
        """Validate one ingest micro-batch; writes and returns its quality_runs rows.

        ``parsed``: the batch (valid and quarantined, with ``quarantine_reason``); ``valid``: its valid records.
        Quarantined records count for the cluster they name; ones naming none (not JSON, say) count
        against every cluster in the batch, since any of them may have sent it.
        ``per_cluster``: ``merge_ingest_summaries`` of ``parsed``'s summary, as the sink's landing pass
        computes it beside its writes; None: one Spark job computes it here (``summarize_frame``). ``valid`` is read
        only when some valid record failed (for samples).
        """
        if not self.enabled:
            return []
        started = time.monotonic()
        records, compiled, by_gx, missing = self._compile_records(parsed.columns)
        aggregated = (
            merge_ingest_summaries(self.summarize_frame(parsed)) if per_cluster is None else per_cluster
        )
        per_cluster = [r for r in aggregated if r["records"]]
        if not per_cluster:
            return []
        unattributed = sum(r["quarantined"] for r in per_cluster if r["cluster"] is None)
        clusters = []
        for r in per_cluster:
            extra = 0 if r["cluster"] is None else unattributed
            clusters.append(
                {
                    "cluster": r["cluster"],
                    "records": r["records"] + extra,
                    "quarantined": r["quarantined"] + extra,
                    "quarantine_share": (r["quarantined"] + extra) / (r["records"] + extra),
                    "first_ts_ms": r["first_ts_ms"],
                    "last_ts_ms": r["last_ts_ms"],
                }
            )

        failures: dict[str | None, list[dict]] = {c["cluster"]: [] for c in clusters}
        evaluated = len(records)
        failing = [i for i in range(len(compiled)) if any(r[f"_n{i}"] for r in aggregated)]
        samples = self._samples(valid, [(i, *compiled[i]) for i in failing]) if failing else {}
        for i in failing:
            expectation = compiled[i][0]
            meta, column = expectation.get("meta", {}), expectation["kwargs"]["column"]
            for r in aggregated:
                count = r[f"_n{i}"] or 0
                if count == 0:
                    continue
                sample = (
                    [None]
                    if expectation["type"] == "expect_column_values_to_not_be_null"
                    else samples.get((r["cluster"], i), [])
                )
                failures.setdefault(r["cluster"], []).append(
                    {
                        "expectation": expectation["type"],
                        "column": column,
                        "says": meta.get("says", expectation["type"]),
                        "unexpected_count": count,
                        "sample": sample,
                        "error": None,
                    }
                )
        for expectation in missing:  # GX fails these with an error it cannot attribute to a cluster
            failures.setdefault(None, []).append(
                {
                    "expectation": expectation["type"],
                    "column": expectation["kwargs"]["column"],
                    "says": expectation.get("meta", {}).get("says", expectation["type"]),
                    "unexpected_count": None,
                    "sample": [],
                    "error": f"column {expectation['kwargs']['column']!r} not in the batch",
                }
            )
        if by_gx:
            self._validate_records_with_gx(valid, by_gx, failures)

        import pandas as pd

        cluster_frame = pd.DataFrame(
            clusters,
            columns=["cluster", "records", "quarantined", "quarantine_share", "first_ts_ms", "last_ts_ms"],
        )
        result = self.validate(
            self._suite(self.telemetry_suite, "clusters"),
            cluster_frame,
            {"result_format": "COMPLETE", "unexpected_index_column_names": ["cluster"]},
        )
        evaluated += len(result.results)
        for item in result.results:
            if item.success:
                continue
            kind, column, says = _describe(item)
            for row in item.result.get("unexpected_index_list") or [{"cluster": None}]:
                failures.setdefault(_py(row.get("cluster")), []).append(
                    {
                        "expectation": kind,
                        "column": column,
                        "says": says,
                        "observed": _py(row.get(column)),
                        "limit": self.parameters.get("max_quarantine_share"),
                    }
                )
        elapsed_ms = int((time.monotonic() - started) * 1000)

        spans = {c["cluster"]: c for c in clusters}
        rows = []
        for name, failed in failures.items():
            span = spans.get(name, {})
            rows.append(
                self._run_row(
                    "ingest",
                    app_id,
                    batch_id,
                    name,
                    span.get("first_ts_ms"),
                    span.get("last_ts_ms"),
                    self.telemetry_suite,
                    evaluated,
                    failed,
                    elapsed_ms,
                    {
                        "records": span.get("records"),
                        "quarantined": span.get("quarantined"),
                        "quarantine_share": span.get("quarantine_share"),
                    },
                )
            )
        self._write(rows, app_id, batch_id)
        log.info(
            "ingest batch %d: contract %s in %d ms",
            batch_id,
            "passed" if all(r["success"] for r in rows) else "FAILED",
            elapsed_ms,
        )
        return rows

    def _compile_records(self, columns: list[str]) -> tuple[list[dict], list, list[dict], list[dict]]:
        """The suite's records expectations; those compiled to Spark conditions (in ``_n{i}`` order),
        those left to GX, and those naming a column the batch lacks."""
        records = [
            e
            for e in suite_json(self.telemetry_suite)["expectations"]
            if e.get("meta", {}).get("frame") == "records"
        ]
        compiled, by_gx, missing = [], [], []
        for expectation in records:
            condition = unexpected_condition(expectation, self.parameters)
            if condition is None:
                by_gx.append(expectation)
            elif expectation["kwargs"]["column"] not in columns:
                missing.append(expectation)
            else:
                compiled.append((expectation, condition))
        return records, compiled, by_gx, missing

    def ingest_probes(self, parsed: DataFrame) -> list[Column]:
        """Columns to add to ``parsed`` (valid and quarantined records) for ``summarize_ingest``, few and
        narrow as they travel to Python with every record: whether it was quarantined; for a
        quarantined one without a typed cluster or event time, those its JSON names; and per
        ``_BITS`` compiled expectations a long ``_unexpected{k}`` whose bit i is set when the valid
        record is unexpected by expectation ``k * _BITS + i`` (none when the contract is disabled)."""
        compiled = self._compile_records(parsed.columns)[1] if self.enabled else []
        bad = F.col("quarantine_reason").isNotNull()
        value = F.col("value").cast("string")
        probes = [
            bad.alias("_bad"),
            # Valid UTF-8 whatever the value holds: it names a cluster in quality_runs.
            F.when(
                bad & F.col("cluster").isNull(), F.make_valid_utf8(F.get_json_object(value, "$.cluster"))
            ).alias("_named_cluster"),
            F.when(bad & F.col("ts").isNull(), F.get_json_object(value, "$.ts").try_cast("long")).alias(
                "_named_ts"
            ),
        ]
        for k in range(0, len(compiled), _BITS):
            mask = F.lit(0).cast("long")
            for bit, (_, condition) in enumerate(compiled[k : k + _BITS]):
                mask = mask.bitwiseOR(
                    F.when(~bad & condition, F.lit(1 << bit)).otherwise(F.lit(0)).cast("long")
                )
            probes.append(mask.alias(f"_unexpected{k // _BITS}"))
        return probes

    def summarize_frame(self, parsed: DataFrame) -> pa.Table:
        """``summarize_ingest`` over all of ``parsed``, by one Spark job (the sink on delta-rs gets it
        from its landing pass instead)."""
        probes = parsed.select("cluster", "ts", *self.ingest_probes(parsed))
        masks = sum(c.startswith("_unexpected") for c in probes.columns)
        schema = ", ".join(
            [
                "cluster string",
                *(f"{name} long" for name in _SUMMARY_LONGS),
                *(f"_n{i} long" for i in range(masks * _BITS)),
            ]
        )
        return probes.mapInArrow(_summarize_batches, schema).toArrow()

    @staticmethod
    def _samples(valid: DataFrame, failing: list) -> dict[tuple, list]:
        """(cluster, i) → the least and greatest unexpected value of failing expectation i, from one more
        aggregation, run only when some valid record failed (the parser quarantines most such records)."""
        aggregates = []
        for i, expectation, condition in failing:
            value = F.when(condition, F.col(expectation["kwargs"]["column"]))
            aggregates += [F.min(value).alias(f"_lo{i}"), F.max(value).alias(f"_hi{i}")]
        any_failed = F.lit(False)
        for _, _, condition in failing:
            any_failed |= condition
        rows = valid.where(any_failed).groupBy("cluster").agg(*aggregates).collect()
        return {
            (r["cluster"], i): list(dict.fromkeys(v for v in (r[f"_lo{i}"], r[f"_hi{i}"]) if v is not None))
            for r in rows
            for i, _, _ in failing
        }

    def _validate_records_with_gx(self, valid: DataFrame, expectations: list[dict], failures: dict) -> None:
        """The records expectations not compiled to Spark, by GX on Spark. Healthy batches pass with
        BOOLEAN_ONLY, GX's cheapest format; a failing one is validated again for the rows naming its clusters."""
        key = f"{self.telemetry_suite}.records.gx"
        if key not in self._suites:
            from great_expectations.core import ExpectationSuite

            _gx()
            self._suites[key] = ExpectationSuite(name=key, expectations=expectations)
        suite = self._suites[key]
        result = self.validate(suite, valid, "BOOLEAN_ONLY")
        if result.success:
            return
        result = self.validate(
            suite,
            valid,
            {
                "result_format": "SUMMARY",
                "partial_unexpected_count": PARTIAL_ROWS,
                "unexpected_index_column_names": ["cluster"],
            },
        )
        for item in result.results:
            if item.success:
                continue
            kind, column, says = _describe(item)
            rows = item.result.get("partial_unexpected_index_list") or []
            for name in {row.get("cluster") for row in rows} or {None}:
                failures.setdefault(name, []).append(
                    {
                        "expectation": kind,
                        "column": column,
                        "says": says,
                        "unexpected_count": item.result.get("unexpected_count"),
                        "sample": item.result.get("partial_unexpected_list", [])[:5],
                        "error": (item.exception_info or {}).get("exception_message"),
                    }
                )

    # -- balance ----------------------------------------------------------------------------

    def broker_checks(self, windows: DataFrame, partitions: DataFrame):
        """One row per (cluster, window, broker) named in a replica list or sending a capacity report, as a
        pandas frame: cluster, window_start_ms, window_end_ms, broker, hosted_replicas,
        unreported_replicas, capacity_reports, coverage, report_age_seconds.

        ``windows``: one row per report, as ``loads.replica_windows`` gives them; ``partitions``: their
        ``loads.partition_load``. A broker's unreported replicas are those it hosts less those it reported
        that its partition's replica list names: each report is matched with its list by a join on
        ``PARTITION_KEYS``, which both frames are already partitioned and sorted by (no shuffle, no sort).
        The rest is summed per broker: a few hundred groups, so Spark pre-aggregates before it shuffles."""
        import pandas as pd

        keys = list(WINDOW_KEYS)
        no_long, no_ts = F.lit(None).cast("long"), F.lit(None).cast("timestamp")
        hosted = partitions.select(
            *keys,
            F.explode("replicas").alias("broker"),
            F.lit(1).cast("long").alias("hosted"),
            F.lit(0).cast("long").alias("reported"),
            no_long.alias("capacity"),
            no_ts.alias("last_ts"),
        )
        lists = partitions.select(*PARTITION_KEYS, F.col("replicas").alias("_replicas"))
        # How often the reporting broker appears in its partition's list (0 for a broker report: no topic).
        listed = F.size("_replicas") - F.size(F.array_remove("_replicas", F.col("broker").cast("int")))
        reports = windows.join(lists, list(PARTITION_KEYS), "left").select(
            *keys,
            F.col("broker").cast("int").alias("broker"),
            F.lit(0).cast("long").alias("hosted"),
            F.when(F.col("type") == "partition", F.coalesce(listed, F.lit(0)))
            .otherwise(0)
            .cast("long")
            .alias("reported"),
            F.when(F.col("type") == "broker", F.col("samples").cast("long")).alias("capacity"),
            "last_ts",
        )
        start_ms, end_ms = _ms("window_start"), _ms("window_end")
        per_broker = (
            hosted.unionByName(reports)
            .groupBy(*keys, "broker")
            .agg(
                F.sum("hosted").alias("hosted_replicas"),
                (F.sum("hosted") - F.sum("reported")).alias("unreported_replicas"),
                F.sum("capacity").alias("capacity_reports"),
                F.max("last_ts").alias("last_report"),
            )
            # Named in a replica list, or sent a capacity report (a broker row has samples >= 1).
            .where((F.col("hosted_replicas") > 0) | F.col("capacity_reports").isNotNull())
            .select(
                "cluster",
                start_ms.alias("window_start_ms"),
                end_ms.alias("window_end_ms"),
                "broker",
                F.col("hosted_replicas").cast("long").alias("hosted_replicas"),
                F.col("unreported_replicas").cast("long").alias("unreported_replicas"),
                F.coalesce("capacity_reports", F.lit(0)).cast("long").alias("capacity_reports"),
                # A broker with no report at all is as stale as the whole window.
                F.coalesce(_ms("last_report"), start_ms).alias("_last_ms"),
            )
        )
        frame = per_broker.toPandas()
        # Coverage against the best-covered broker of the same window: needs no report interval setting.
        best = frame.groupby(["cluster", "window_start_ms", "window_end_ms"])["capacity_reports"].transform(
            "max"
        )
        frame["coverage"] = (frame["capacity_reports"] / best.where(best > 0)).fillna(0.0).astype("float64")
        frame["report_age_seconds"] = ((frame["window_end_ms"] - frame["_last_ms"]) / 1000.0).astype(
            "float64"
        )
        return pd.DataFrame(frame.drop(columns="_last_ms").reset_index(drop=True))

    def check_windows(
        self, windows: DataFrame, partitions: DataFrame, *, app_id: str, batch_id: int
    ) -> DataFrame | None:
        """Validate the batch's finalized windows; writes quality_runs and returns the blocked
        (cluster, window_start, window_end, reason) rows (None when the contract is disabled)."""
        if not self.enabled:
            return None
        started = time.monotonic()
        spark = windows.sparkSession
        checks = self.broker_checks(windows, partitions)
        window_keys = sorted(
            {
                (_py(c), _py(s), _py(e))
                for c, s, e in zip(checks["cluster"], checks["window_start_ms"], checks["window_end_ms"])
            }
        )
        if not window_keys:
            return None
        result = self.validate(
            self._suite(WINDOWS_SUITE),
            checks,
            {"result_format": "COMPLETE", "unexpected_index_column_names": _WINDOW_INDEX},
        )
        failures: dict[tuple, list[dict]] = {key: [] for key in window_keys}
        for item in result.results:
            if item.success:
                continue
            kind, column, says = _describe(item)
            rows = item.result.get("unexpected_index_list")
            if not rows:  # an error, not unexpected rows: it cannot be attributed, so every window fails
                error = (item.exception_info or {}).get("exception_message", "validation error")
                for key in window_keys:
                    failures[key].append({"expectation": kind, "column": column, "says": f"{says}: {error}"})
                continue
            for row in rows:
                key = (_py(row["cluster"]), _py(row["window_start_ms"]), _py(row["window_end_ms"]))
                failures.setdefault(key, []).append(
                    {
                        "expectation": kind,
                        "column": column,
                        "says": says,
                        "broker": _py(row["broker"]),
                        "observed": _py(row.get(column)),
                    }
                )
        ingest_failures = self._ingest_failures(window_keys)
        elapsed_ms = int((time.monotonic() - started) * 1000)

        brokers = checks.groupby(["cluster", "window_start_ms", "window_end_ms"]).size()
        rows, blocked = [], []
        for key in window_keys:
            failed = failures[key] + ingest_failures.get(key, [])
            row = self._run_row(
                "balance",
                app_id,
                batch_id,
                key[0],
                key[1],
                key[2],
                WINDOWS_SUITE,
                len(result.results),
                failed,
                elapsed_ms,
                {"brokers": int(brokers.get(key, 0))},
            )
            rows.append(row)
            if failed:
                blocked.append(
                    (key[0], key[1], key[2], "data contract failed: " + row["failed_expectations"])
                )
        self._write(rows, app_id, batch_id)
        log.info(
            "balance batch %d: %d of %d windows failed the contract (%d ms)",
            batch_id,
            len(blocked),
            len(window_keys),
            elapsed_ms,
        )
        return spark.createDataFrame(
            blocked, "cluster string, start_ms long, end_ms long, reason string"
        ).select(
            "cluster",
            F.timestamp_millis("start_ms").alias("window_start"),
            F.timestamp_millis("end_ms").alias("window_end"),
            "reason",
        )

    def _ingest_failures(self, window_keys: list[tuple]) -> dict[tuple, list[dict]]:
        """Failed ingest runs whose event-time span overlaps a window, per window.

        The sink checks a batch's records before it closes the windows they move the watermark past,
        so those verdicts are already in quality_runs.
        """
        latest_end = max(key[2] for key in window_keys)
        earliest_start = min(key[1] for key in window_keys)
        clusters = sorted({key[0] for key in window_keys})
        failed = self._ingest_runs(earliest_start, latest_end, clusters)
        found: dict[tuple, list[dict]] = {}
        for key in window_keys:
            cluster, start, end = key
            for run in failed:
                if (
                    run["cluster"] == cluster
                    and run["first"] is not None
                    and run["first"] < end
                    and run["last"] >= start
                ):
                    found.setdefault(key, []).append(
                        {
                            "expectation": "ingest",
                            "column": "",
                            "says": f"ingest batch {run['batch_id']}: {run['failed_expectations']}",
                        }
                    )
        return found

    def _ingest_runs(self, since_ms: int, until_ms: int, clusters: list[str]) -> list[dict]:
        """Failed ingest runs of ``clusters`` that may overlap [since_ms, until_ms): (cluster, batch_id,
        success, first, last, failed_expectations), first/last in epoch ms. Files whose statistics rule
        the range out are not read (delta-rs: by pyarrow, no Spark job)."""
        if self.lakehouse.engine == "delta-rs":
            import pyarrow.dataset as ds

            if not self.lakehouse.exists("quality_runs"):
                return []
            since = pa.scalar(_to_dt(since_ms), pa.timestamp("us", tz="UTC"))
            until = pa.scalar(_to_dt(until_ms), pa.timestamp("us", tz="UTC"))
            end, start = ds.field("window_end"), ds.field("window_start")
            wanted = (
                (ds.field("query") == "ingest")
                & (end >= since)
                & (start < until)
                & ~ds.field("success")
                & ds.field("cluster").isin(clusters)
            )
            table = (
                self.lakehouse.delta("quality_runs")
                .to_pyarrow_dataset()
                .to_table(
                    columns=[
                        "cluster",
                        "batch_id",
                        "success",
                        "window_start",
                        "window_end",
                        "failed_expectations",
                    ],
                    filter=wanted,
                )
            )
            as_ms = {name: table[name].cast(pa.int64()) for name in ("window_start", "window_end")}
            return [
                {
                    "cluster": c,
                    "batch_id": b,
                    "success": s,
                    "first": None if f is None else f // 1000,
                    "last": None if l is None else l // 1000,
                    "failed_expectations": x,
                }
                for c, b, s, f, l, x in zip(
                    table["cluster"].to_pylist(),
                    table["batch_id"].to_pylist(),
                    table["success"].to_pylist(),
                    as_ms["window_start"].to_pylist(),
                    as_ms["window_end"].to_pylist(),
                    table["failed_expectations"].to_pylist(),
                )
            ]
        end, start = _ms("window_end"), _ms("window_start")
        wanted = (
            (F.col("query") == "ingest")
            & (end >= F.lit(since_ms))
            & (start < F.lit(until_ms))
            & ~F.col("success")
            & F.col("cluster").isin(clusters)
        )
        return [
            r.asDict()
            for r in self.lakehouse.read("quality_runs")
            .where(wanted)
            .select(
                "cluster",
                "batch_id",
                "success",
                start.alias("first"),
                end.alias("last"),
                "failed_expectations",
            )
            .collect()
        ]

    # -- quality_runs -------------------------------------------------------------------------

    def _run_row(
        self,
        query: str,
        app_id: str,
        batch_id: int,
        cluster: str | None,
        start_ms: int | None,
        end_ms: int | None,
        suite: str,
        evaluated: int,
        failed: list[dict],
        elapsed_ms: int,
        details: dict,
    ) -> dict:
        readable = "; ".join(
            (f"broker {f['broker']}: " if f.get("broker") is not None else "")
            + f["says"]
            + (f" (observed {f['observed']:.4g})" if isinstance(f.get("observed"), (int, float)) else "")
            + (f" [{f['expectation']} on {f['column']}]" if f["column"] else "")
            for f in failed
        )
        return {
            "run_id": str(uuid.uuid5(_NAMESPACE, f"{app_id}|{batch_id}|{cluster}|{start_ms}|{end_ms}")),
            "query": query,
            "batch_id": batch_id,
            "cluster": cluster,
            "window_start": _to_dt(start_ms),
            "window_end": _to_dt(end_ms),
            "suite": suite,
            "success": not failed,
            "evaluated": evaluated,
            "failed_expectations": readable or None,
            "details_json": json.dumps({**details, "failures": failed}, default=str),
            "validation_ms": elapsed_ms,
            "checked_at": datetime.now(UTC),
        }

    def _write(self, rows: list[dict], app_id: str, batch_id: int) -> None:
        table = pa.Table.from_pylist(rows, schema=arrow_schema("quality_runs"))
        self.lakehouse.append("quality_runs", table, app_id=f"{app_id}-quality", batch_id=batch_id)
