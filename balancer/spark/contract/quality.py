"""The telemetry data contract: Great Expectations suites from ``lakehouse/expectations``, checked on
every micro-batch; results land in ``quality_runs``.

- Ingest: ``telemetry_v1``. Its ``records`` expectations hold for each of the batch's valid records
  (required fields, value ranges); its ``clusters`` ones for one row per cluster in the batch (share of
  quarantined records). A failing cluster's run is recorded with the event-time span of its records.
- Balance: ``windows_v1`` on one row per (cluster, window, broker). Failures name their cluster,
  window and broker through GX's unexpected index rows. A window fails when ``windows_v1`` fails for
  it, or when a failed ingest run of its cluster overlaps it; such windows are returned as
  ``blocked`` and get a ``skipped`` plan.

The seams: ``expectations`` (suites, and per-record expectations compiled to Spark and carried through
the landing pass), ``gx_runner`` (GX itself), ``quality_runs`` (the results table and its ``Failure``
records); this module decides which frame each suite sees and what a failure blocks.

Cost: a bounded, small number of Spark jobs per call, whatever the suites hold. GX's Spark engine
runs every metric of every expectation as its own Spark job (`make bench-quality` prints the jobs
and seconds per call of both: benchmarks/README.md, "Data contract cost"), so:

- the per-record expectations (``not_be_null``, ``be_in_set``, ``be_between``, GX's semantics:
  nulls are ignored except by ``not_be_null``) are compiled into Spark conditions, carried as bits of
  probe columns (``Contract.ingest_probes``), and reduced per cluster with the cluster's quarantined
  records and event-time span (``IngestProbes.summarize``, Arrow) in the same pass that lands the
  batch, so no Spark job of its own: per expectation, the number of unexpected records; only when
  some are, one aggregation takes the smallest and largest unexpected value of each failed
  expectation (the sample);
- the per-cluster and per-window frames are built by ONE Spark aggregation each, collected (a few
  hundred rows), and validated by GX on pandas, which starts no Spark job;
- the ingest verdicts a window waits for are read from ``quality_runs`` with ``Lakehouse.select``
  (by file statistics, no Spark job, on delta-rs).

A records expectation of any other type, or with other arguments (``mostly``, ``row_condition``), is
validated by GX on Spark: slower, but never skipped.

Over 500 lines by its docstring: the code itself is the two checks and the frames each suite sees.
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from balancer.config import QualityConfig
from balancer.spark.contract.expectations import (
    EXPECTATIONS_DIR,
    TELEMETRY_SUITE,
    TELEMETRY_SUITES,
    WINDOWS_SUITE,
    ClusterIngest,
    CompiledRecords,
    IngestProbes,
    merge_ingest_summaries,
    suite_json,
    unexpected_condition,
)
from balancer.spark.contract.gx_runner import GxRunner, describe, load_suite, py
from balancer.spark.contract.quality_runs import Failure, QualityRuns, run_row
from balancer.spark.lakehouse import Lakehouse
from balancer.spark.lakehouse.parquet import summarize_frame
from balancer.spark.windows.loads import PARTITION_KEYS, WINDOW_KEYS

log = logging.getLogger(__name__)

__all__ = [
    "EXPECTATIONS_DIR",
    "TELEMETRY_SUITE",
    "TELEMETRY_SUITES",
    "WINDOWS_SUITE",
    "ClusterIngest",
    "Contract",
    "Failure",
    "IngestProbes",
    "load_suite",
    "merge_ingest_summaries",
    "suite_json",
    "unexpected_condition",
]

# Row-level failures GX validates on Spark (unsupported expectations only) are attributed to
# clusters from this many unexpected rows: a COMPLETE list would pull every bad record to the driver.
PARTIAL_ROWS = 200
_WINDOW_INDEX = ["cluster", "window_start_ms", "window_end_ms", "broker"]


def _ms(column: str):
    return F.unix_millis(F.col(column))


def _says(expectation: dict) -> str:
    return expectation.get("meta", {}).get("says", expectation["type"])


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
            "max_report_age_seconds": quality.max_report_age.seconds,
        }
        self.gx = GxRunner(self.parameters)
        self.runs = QualityRuns(lakehouse)

    def validate(self, suite, frame, result_format):
        """GX validation of a Spark DataFrame, or of a pandas one (small frames: no Spark job)."""
        return self.gx.validate(suite, frame, result_format)

    # -- ingest -----------------------------------------------------------------------------

    def check_ingest(
        self,
        parsed: DataFrame,
        valid: DataFrame,
        *,
        app_id: str,
        batch_id: int,
        per_cluster: list[ClusterIngest] | None = None,
    ) -> list[dict]:
        """Validate one ingest micro-batch; writes and returns its quality_runs rows.

        ``parsed``: the batch (valid and quarantined, with ``quarantine_reason``); ``valid``: its valid
        records. Quarantined records count for the cluster they name; ones naming none (not JSON, say)
        count against every cluster in the batch, since any of them may have sent it.
        ``per_cluster``: ``merge_ingest_summaries`` of ``parsed``'s summary, as the sink's landing pass
        computes it beside its writes; None: one Spark job computes it here (``summarize_frame``).
        ``valid`` is read only when some valid record failed (for samples).
        """
        if not self.enabled:
            return []
        started = time.monotonic()
        records = self.compiled_records(parsed.columns)
        aggregated = (
            merge_ingest_summaries(self.summarize_frame(parsed)) if per_cluster is None else per_cluster
        )
        per_cluster = [r for r in aggregated if r.records]
        if not per_cluster:
            return []
        unattributed = sum(r.quarantined for r in per_cluster if r.cluster is None)
        clusters = []
        for r in per_cluster:
            extra = 0 if r.cluster is None else unattributed
            clusters.append(
                {
                    "cluster": r.cluster,
                    "records": r.records + extra,
                    "quarantined": r.quarantined + extra,
                    "quarantine_share": (r.quarantined + extra) / (r.records + extra),
                    "first_ts_ms": r.first_ts_ms,
                    "last_ts_ms": r.last_ts_ms,
                }
            )

        failures: dict[str | None, list[Failure]] = {c["cluster"]: [] for c in clusters}
        for cluster, failure in self._compiled_failures(records, aggregated, valid):
            failures.setdefault(cluster, []).append(failure)
        for expectation in records.missing:  # GX fails these with an error it cannot attribute to a cluster
            column = expectation["kwargs"]["column"]
            failures.setdefault(None, []).append(
                Failure(
                    "records",
                    expectation["type"],
                    column,
                    _says(expectation),
                    error=f"column {column!r} not in the batch",
                )
            )
        if records.by_gx:
            for cluster, failure in self._validate_records_with_gx(valid, list(records.by_gx)):
                failures.setdefault(cluster, []).append(failure)

        import pandas as pd

        cluster_frame = pd.DataFrame(
            clusters,
            columns=["cluster", "records", "quarantined", "quarantine_share", "first_ts_ms", "last_ts_ms"],
        )
        result = self.validate(
            self.gx.suite(self.telemetry_suite, "clusters"),
            cluster_frame,
            {"result_format": "COMPLETE", "unexpected_index_column_names": ["cluster"]},
        )
        evaluated = len(records.expectations) + len(result.results)
        for item in result.results:
            if item.success:
                continue
            kind, column, says = describe(item)
            for row in item.result.get("unexpected_index_list") or [{"cluster": None}]:
                failures.setdefault(py(row.get("cluster")), []).append(
                    Failure(
                        "clusters",
                        kind,
                        column,
                        says,
                        observed=py(row.get(column)),
                        limit=self.parameters.get("max_quarantine_share"),
                    )
                )
        elapsed_ms = int((time.monotonic() - started) * 1000)

        spans = {c["cluster"]: c for c in clusters}
        rows = []
        for name, failed in failures.items():
            span = spans.get(name, {})
            rows.append(
                run_row(
                    "ingest",
                    app_id,
                    batch_id,
                    name,
                    span.get("first_ts_ms"),
                    span.get("last_ts_ms"),
                    suite=self.telemetry_suite,
                    evaluated=evaluated,
                    failed=failed,
                    elapsed_ms=elapsed_ms,
                    details={
                        "records": span.get("records"),
                        "quarantined": span.get("quarantined"),
                        "quarantine_share": span.get("quarantine_share"),
                    },
                )
            )
        self.runs.write(rows, app_id, batch_id)
        log.info(
            "ingest batch %d: contract %s in %d ms",
            batch_id,
            "passed" if all(r["success"] for r in rows) else "FAILED",
            elapsed_ms,
        )
        return rows

    def _compiled_failures(
        self, records: CompiledRecords, aggregated: list[ClusterIngest], valid: DataFrame
    ) -> list[tuple[str | None, Failure]]:
        """(cluster, failure) per compiled expectation some valid record of the cluster failed."""
        compiled = records.compiled
        failing = [i for i in range(len(compiled)) if any(r.unexpected[i] for r in aggregated)]
        samples = self._samples(valid, [(i, *compiled[i]) for i in failing]) if failing else {}
        found = []
        for i in failing:
            expectation = compiled[i][0]
            for r in aggregated:
                count = r.unexpected[i]
                if count == 0:
                    continue
                sample = (
                    [None]
                    if expectation["type"] == "expect_column_values_to_not_be_null"
                    else samples.get((r.cluster, i), [])
                )
                failure = Failure(
                    "records",
                    expectation["type"],
                    expectation["kwargs"]["column"],
                    _says(expectation),
                    unexpected_count=count,
                    sample=tuple(sample),
                )
                found.append((r.cluster, failure))
        return found

    def compiled_records(self, columns: list[str]) -> CompiledRecords:
        """The ingest suite's records expectations for a batch with ``columns``."""
        return CompiledRecords.of(self.telemetry_suite, columns, self.parameters)

    def ingest_probes(self, columns: list[str]) -> tuple[IngestProbes, list[Column]]:
        """The landing pass's probes for a parsed batch with ``columns`` (one bit per compiled expectation,
        none when the contract is disabled), and the same as Spark columns of that batch."""
        compiled = self.compiled_records(columns).compiled if self.enabled else ()
        probes = IngestProbes.for_expectations(len(compiled))
        return probes, probes.spark_columns([condition for _, condition in compiled])

    def summarize_frame(self, parsed: DataFrame) -> pa.Table:
        """``IngestProbes.summarize`` over all of ``parsed``, by one Spark job (the sink's landing pass gets
        it from the same pass that lands the batch instead)."""
        probes, columns = self.ingest_probes(parsed.columns)
        return summarize_frame(parsed.select("cluster", "ts", *columns), probes)

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

    def _validate_records_with_gx(
        self, valid: DataFrame, expectations: list[dict]
    ) -> list[tuple[str | None, Failure]]:
        """The records expectations not compiled to Spark, by GX on Spark: (cluster, failure) for each
        cluster named by a failing row. Healthy batches pass with BOOLEAN_ONLY, GX's cheapest format; a
        failing one is validated again for the rows naming its clusters."""
        suite = self.gx.suite_of(f"{self.telemetry_suite}.records.gx", expectations)
        result = self.validate(suite, valid, "BOOLEAN_ONLY")
        if result.success:
            return []
        result = self.validate(
            suite,
            valid,
            {
                "result_format": "SUMMARY",
                "partial_unexpected_count": PARTIAL_ROWS,
                "unexpected_index_column_names": ["cluster"],
            },
        )
        found = []
        for item in result.results:
            if item.success:
                continue
            kind, column, says = describe(item)
            rows = item.result.get("partial_unexpected_index_list") or []
            failure = Failure(
                "records",
                kind,
                column,
                says,
                unexpected_count=item.result.get("unexpected_count"),
                sample=tuple(item.result.get("partial_unexpected_list", [])[:5]),
                error=(item.exception_info or {}).get("exception_message"),
            )
            found += [(name, failure) for name in {row.get("cluster") for row in rows} or {None}]
        return found

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
                (py(c), py(s), py(e))
                for c, s, e in zip(checks["cluster"], checks["window_start_ms"], checks["window_end_ms"])
            }
        )
        if not window_keys:
            return None
        result = self.validate(
            self.gx.suite(WINDOWS_SUITE),
            checks,
            {"result_format": "COMPLETE", "unexpected_index_column_names": _WINDOW_INDEX},
        )
        failures: dict[tuple, list[Failure]] = {key: [] for key in window_keys}
        for item in result.results:
            if item.success:
                continue
            kind, column, says = describe(item)
            rows = item.result.get("unexpected_index_list")
            if not rows:  # an error, not unexpected rows: it cannot be attributed, so every window fails
                error = (item.exception_info or {}).get("exception_message", "validation error")
                for key in window_keys:
                    failures[key].append(Failure("verdict", kind, column, f"{says}: {error}"))
                continue
            for row in rows:
                key = (py(row["cluster"]), py(row["window_start_ms"]), py(row["window_end_ms"]))
                failures.setdefault(key, []).append(
                    Failure(
                        "brokers", kind, column, says, broker=py(row["broker"]), observed=py(row.get(column))
                    )
                )
        ingest_failures = self._ingest_failures(window_keys)
        elapsed_ms = int((time.monotonic() - started) * 1000)

        brokers = checks.groupby(["cluster", "window_start_ms", "window_end_ms"]).size()
        rows, blocked = [], []
        for key in window_keys:
            failed = failures[key] + ingest_failures.get(key, [])
            row = run_row(
                "balance",
                app_id,
                batch_id,
                key[0],
                key[1],
                key[2],
                suite=WINDOWS_SUITE,
                evaluated=len(result.results),
                failed=failed,
                elapsed_ms=elapsed_ms,
                details={"brokers": int(brokers.get(key, 0))},
            )
            rows.append(row)
            if failed:
                blocked.append(
                    (key[0], key[1], key[2], "data contract failed: " + row["failed_expectations"])
                )
        self.runs.write(rows, app_id, batch_id)
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

    def _ingest_failures(self, window_keys: list[tuple]) -> dict[tuple, list[Failure]]:
        """Failed ingest runs whose event-time span overlaps a window, per window.

        The sink checks a batch's records before it closes the windows they move the watermark past,
        so those verdicts are already in quality_runs.
        """
        latest_end = max(key[2] for key in window_keys)
        earliest_start = min(key[1] for key in window_keys)
        clusters = sorted({key[0] for key in window_keys})
        failed = self.runs.failed_ingest(earliest_start, latest_end, clusters)
        found: dict[tuple, list[Failure]] = {}
        for key in window_keys:
            cluster, start, end = key
            for run in failed:
                if (
                    run.cluster == cluster
                    and run.first_ms is not None
                    and run.first_ms < end
                    and run.last_ms >= start
                ):
                    says = f"ingest batch {run.batch_id}: {run.failed_expectations}"
                    found.setdefault(key, []).append(Failure("verdict", "ingest", "", says))
        return found
