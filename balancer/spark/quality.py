"""The telemetry data contract: Great Expectations suites from ``lakehouse/expectations``, run on
every micro-batch with GX's Spark data source; results land in ``quality_runs``.

- Ingest: ``telemetry_v1`` on the batch's valid records (required fields, value ranges) and on one
  row per cluster (share of quarantined records). A failing cluster's run is recorded with the
  event-time span of its records in the batch.
- Balance: ``windows_v1`` on one row per (cluster, window, broker), aggregated in Spark first so
  GX validates a small frame once per batch. Failures name their cluster, window and broker through
  GX's unexpected index rows. A window fails when ``windows_v1`` fails for it, or when a failed
  ingest run of its cluster overlaps it; such windows are returned as ``blocked`` and get a
  ``skipped`` plan.

GX is slow per call (its metrics are separate Spark jobs), so each sink makes at most two calls per
micro-batch on cached or tiny frames, and nothing at all when ``quality.enabled`` is false.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from datetime import datetime, timezone
from functools import cache

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from balancer.config import QualityConfig, duration_seconds
from balancer.resources import resource_root
from balancer.spark.lakehouse import Lakehouse, arrow_schema
from balancer.spark.loads import WINDOW_KEYS

log = logging.getLogger(__name__)

EXPECTATIONS_DIR = resource_root() / "lakehouse" / "expectations"
TELEMETRY_SUITE = "telemetry_v1"
WINDOWS_SUITE = "windows_v1"
# Row-level failures are attributed to clusters from this many unexpected rows: a COMPLETE list
# of a large batch would pull every bad record to the driver.
PARTIAL_ROWS = 200
_NAMESPACE = uuid.UUID("0c3e5b7a-4f0e-4a43-9d3c-7f0b6f1e2a55")
_WINDOW_INDEX = ["cluster", "window_start_ms", "window_end_ms", "broker"]


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
    return None if ms is None else datetime.fromtimestamp(ms / 1000, timezone.utc)


def _describe(result) -> tuple[str, str, str]:
    """(expectation type, column, what it says) for a GX expectation result."""
    config = result.expectation_config
    return config.type, config.kwargs.get("column", ""), (config.meta or {}).get("says", config.type)


class Contract:
    """Runs the suites for one sink. GX is imported and set up on first use, once."""

    def __init__(self, lakehouse: Lakehouse, quality: QualityConfig):
        self.lakehouse = lakehouse
        self.quality = quality
        self.enabled = quality.enabled
        self.parameters = {"max_quarantine_share": quality.max_quarantine_share,
                           "min_broker_coverage": quality.min_broker_coverage,
                           "max_report_age_seconds": duration_seconds(quality.max_report_age)}
        self._batch_definition = None
        self._suites: dict[str, object] = {}

    # -- GX plumbing ------------------------------------------------------------------------

    def _definition(self):
        if self._batch_definition is None:
            gx = _gx()
            from great_expectations.data_context.types.base import ProgressBarsConfig

            context = gx.get_context(mode="ephemeral")
            context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
            # persist=False: GX would cache every frame it is given and never release it.
            source = context.data_sources.add_spark(name="balancer", persist=False)
            asset = source.add_dataframe_asset(name="contract")
            self._batch_definition = asset.add_batch_definition_whole_dataframe("micro_batch")
        return self._batch_definition

    def _suite(self, name: str, frame: str | None = None):
        key = f"{name}.{frame}"
        if key not in self._suites:
            self._suites[key] = load_suite(name, frame)
        return self._suites[key]

    def validate(self, suite, frame: DataFrame, result_format):
        batch = self._definition().get_batch(batch_parameters={"dataframe": frame})
        return batch.validate(suite, result_format=result_format, expectation_parameters=self.parameters)

    # -- ingest -----------------------------------------------------------------------------

    def check_ingest(self, parsed: DataFrame, valid: DataFrame, *, app_id: str, batch_id: int) -> list[dict]:
        """Validate one ingest micro-batch; writes and returns its quality_runs rows.

        ``parsed``: the batch (valid and quarantined, with ``quarantine_reason``); ``valid``: its valid records.
        Quarantined records count for the cluster they name; ones naming none (not JSON, say) count
        against every cluster in the batch, since any of them may have sent it.
        """
        if not self.enabled:
            return []
        started = time.monotonic()
        cluster = F.coalesce(F.col("cluster"), F.get_json_object(F.col("value"), "$.cluster"))
        ts_ms = F.coalesce(F.unix_millis(F.col("ts")),
                           F.get_json_object(F.col("value"), "$.ts").try_cast("long"))
        per_cluster = (parsed.select(cluster.alias("cluster"), ts_ms.alias("ts_ms"),
                                     F.col("quarantine_reason").isNotNull().alias("bad"))
                       .groupBy("cluster")
                       .agg(F.count(F.lit(1)).alias("records"), F.sum(F.col("bad").cast("long")).alias("quarantined"),
                            F.min("ts_ms").alias("first_ts_ms"), F.max("ts_ms").alias("last_ts_ms"))
                       .collect())
        if not per_cluster:
            return []
        unattributed = sum(r["quarantined"] for r in per_cluster if r["cluster"] is None)
        clusters = []
        for r in per_cluster:
            extra = 0 if r["cluster"] is None else unattributed
            clusters.append({"cluster": r["cluster"], "records": r["records"] + extra,
                             "quarantined": r["quarantined"] + extra,
                             "quarantine_share": (r["quarantined"] + extra) / (r["records"] + extra),
                             "first_ts_ms": r["first_ts_ms"], "last_ts_ms": r["last_ts_ms"]})
        spark = parsed.sparkSession
        cluster_frame = spark.createDataFrame(
            clusters, "cluster string, records long, quarantined long, quarantine_share double, "
                      "first_ts_ms long, last_ts_ms long")

        failures: dict[str | None, list[dict]] = {c["cluster"]: [] for c in clusters}
        evaluated = 0
        # Healthy batches (the usual case) pass with BOOLEAN_ONLY, GX's cheapest format; only a
        # failing batch is validated again with the unexpected rows needed to name its clusters.
        records_suite = self._suite(TELEMETRY_SUITE, "records")
        result = self.validate(records_suite, valid, "BOOLEAN_ONLY")
        evaluated += len(result.results)
        if not result.success:
            result = self.validate(records_suite, valid, {
                "result_format": "SUMMARY", "partial_unexpected_count": PARTIAL_ROWS,
                "unexpected_index_column_names": ["cluster"]})
            for item in result.results:
                if item.success:
                    continue
                kind, column, says = _describe(item)
                rows = item.result.get("partial_unexpected_index_list") or []
                named = {row.get("cluster") for row in rows} or {None}
                for name in named:
                    failures.setdefault(name, []).append({
                        "expectation": kind, "column": column, "says": says,
                        "unexpected_count": item.result.get("unexpected_count"),
                        "sample": item.result.get("partial_unexpected_list", [])[:5],
                        "error": (item.exception_info or {}).get("exception_message")})
        cluster_suite = self._suite(TELEMETRY_SUITE, "clusters")
        result = self.validate(cluster_suite, cluster_frame, {
            "result_format": "COMPLETE", "unexpected_index_column_names": ["cluster"]})
        evaluated += len(result.results)
        for item in result.results:
            if item.success:
                continue
            kind, column, says = _describe(item)
            for row in item.result.get("unexpected_index_list") or [{"cluster": None}]:
                failures.setdefault(row.get("cluster"), []).append({
                    "expectation": kind, "column": column, "says": says, "observed": row.get(column),
                    "limit": self.parameters.get("max_quarantine_share")})
        elapsed_ms = int((time.monotonic() - started) * 1000)

        spans = {c["cluster"]: c for c in clusters}
        rows = []
        for name, failed in failures.items():
            span = spans.get(name, {})
            rows.append(self._run_row(
                "ingest", app_id, batch_id, name, span.get("first_ts_ms"), span.get("last_ts_ms"), TELEMETRY_SUITE,
                evaluated, failed, elapsed_ms,
                {"records": span.get("records"), "quarantined": span.get("quarantined"),
                 "quarantine_share": span.get("quarantine_share")}))
        self._write(rows, app_id, batch_id)
        log.info("ingest batch %d: contract %s in %d ms", batch_id,
                 "passed" if all(r["success"] for r in rows) else "FAILED", elapsed_ms)
        return rows

    # -- balance ----------------------------------------------------------------------------

    def broker_checks(self, windows: DataFrame, partitions: DataFrame) -> DataFrame:
        """One row per (cluster, window, broker) named in a replica list or sending a capacity report."""
        keys = list(WINDOW_KEYS)
        hosted = partitions.select(*keys, "topic", "partition", F.explode("replicas").alias("broker"))
        reports = windows.where(F.col("type") == "partition").select(*keys, "broker", "topic", "partition",
                                                                     F.lit(True).alias("_reported"))
        replicas = (hosted.join(reports, [*keys, "broker", "topic", "partition"], "left")
                    .groupBy(*keys, "broker")
                    .agg(F.count(F.lit(1)).alias("hosted_replicas"),
                         F.sum(F.when(F.col("_reported").isNull(), 1).otherwise(0)).alias("unreported_replicas")))
        capacity = (windows.where(F.col("type") == "broker")
                    .groupBy(*keys, "broker").agg(F.sum("samples").alias("capacity_reports")))
        latest = windows.groupBy(*keys, "broker").agg(F.max("last_ts").alias("last_report"))
        per_window = Window.partitionBy(*keys)
        joined = (replicas.join(capacity, [*keys, "broker"], "full_outer")
                  .join(latest, [*keys, "broker"], "left")
                  .select(*keys, "broker",
                          F.coalesce("hosted_replicas", F.lit(0)).cast("long").alias("hosted_replicas"),
                          F.coalesce("unreported_replicas", F.lit(0)).cast("long").alias("unreported_replicas"),
                          F.coalesce("capacity_reports", F.lit(0)).cast("long").alias("capacity_reports"),
                          "last_report"))
        # Coverage against the best-covered broker of the same window: needs no report interval setting.
        best = F.max("capacity_reports").over(per_window)
        end_ms, start_ms = _ms("window_end"), _ms("window_start")
        return joined.select(
            "cluster", start_ms.alias("window_start_ms"), end_ms.alias("window_end_ms"), "broker",
            "hosted_replicas", "unreported_replicas", "capacity_reports",
            F.coalesce(F.col("capacity_reports") / F.when(best > 0, best), F.lit(0.0)).alias("coverage"),
            # A broker with no report at all is as stale as the whole window.
            ((end_ms - F.coalesce(_ms("last_report"), start_ms)) / 1000.0).alias("report_age_seconds"))

    def check_windows(self, windows: DataFrame, partitions: DataFrame, *, app_id: str,
                      batch_id: int) -> DataFrame | None:
        """Validate the batch's finalized windows; writes quality_runs and returns the blocked
        (cluster, window_start, window_end, reason) rows (None when the contract is disabled)."""
        if not self.enabled:
            return None
        started = time.monotonic()
        spark = windows.sparkSession
        # Collected and rebuilt as a local frame: GX's many metric jobs then never recompute the windows.
        checks = self.broker_checks(windows, partitions).collect()
        window_keys = sorted({(r["cluster"], r["window_start_ms"], r["window_end_ms"]) for r in checks})
        if not window_keys:
            return None
        frame = spark.createDataFrame(checks, schema=(
            "cluster string, window_start_ms long, window_end_ms long, broker int, hosted_replicas long, "
            "unreported_replicas long, capacity_reports long, coverage double, report_age_seconds double"))
        result = self.validate(self._suite(WINDOWS_SUITE), frame, {
            "result_format": "COMPLETE", "unexpected_index_column_names": _WINDOW_INDEX})
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
                key = (row["cluster"], row["window_start_ms"], row["window_end_ms"])
                failures.setdefault(key, []).append({"expectation": kind, "column": column, "says": says,
                                                     "broker": row["broker"], "observed": row.get(column)})
        waited = time.monotonic()
        ingest_failures = self._ingest_failures(window_keys)
        waited = time.monotonic() - waited
        # The overhead recorded excludes time spent waiting for the concurrent ingest query.
        elapsed_ms = int((time.monotonic() - started - waited) * 1000)

        rows, blocked = [], []
        for key in window_keys:
            failed = failures[key] + ingest_failures.get(key, [])
            row = self._run_row("balance", app_id, batch_id, key[0], key[1], key[2], WINDOWS_SUITE,
                                len(result.results), failed, elapsed_ms,
                                {"brokers": sum(1 for r in checks if (r["cluster"], r["window_start_ms"],
                                                                       r["window_end_ms"]) == key),
                                 "ingest_wait_ms": int(waited * 1000)})
            rows.append(row)
            if failed:
                blocked.append((key[0], key[1], key[2], "data contract failed: " + row["failed_expectations"]))
        self._write(rows, app_id, batch_id)
        log.info("balance batch %d: %d of %d windows failed the contract (%d ms)", batch_id, len(blocked),
                 len(window_keys), elapsed_ms)
        return (spark.createDataFrame(blocked, "cluster string, start_ms long, end_ms long, reason string")
                .select("cluster", F.timestamp_millis("start_ms").alias("window_start"),
                        F.timestamp_millis("end_ms").alias("window_end"), "reason"))

    def _ingest_failures(self, window_keys: list[tuple]) -> dict[tuple, list[dict]]:
        """Failed ingest runs whose event-time span overlaps a window, per window.

        The ingest query runs concurrently; wait (up to ``quality.ingest_wait``) until it has
        checked records up to the latest window end, else plan without its verdict.
        """
        latest_end = max(key[2] for key in window_keys)
        deadline = time.monotonic() + duration_seconds(self.quality.ingest_wait)
        while True:
            runs = self.lakehouse.read("quality_runs").where(F.col("query") == "ingest")
            checked = runs.agg(F.max(_ms("window_end"))).first()[0]
            if (checked is not None and checked >= latest_end) or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        if checked is None or checked < latest_end:
            log.warning("ingest contract has not checked records up to %s yet; planning without it",
                        _to_dt(latest_end))
        failed = (runs.where(~F.col("success") & F.col("cluster").isNotNull())
                  .select("cluster", "batch_id", _ms("window_start").alias("first"), _ms("window_end").alias("last"),
                          "failed_expectations").collect())
        found: dict[tuple, list[dict]] = {}
        for key in window_keys:
            cluster, start, end = key
            for run in failed:
                if run["cluster"] == cluster and run["first"] is not None and run["first"] < end \
                        and run["last"] >= start:
                    found.setdefault(key, []).append({
                        "expectation": "ingest", "column": "", "says": f"ingest batch {run['batch_id']}: "
                                                                        f"{run['failed_expectations']}"})
        return found

    # -- quality_runs -------------------------------------------------------------------------

    def _run_row(self, query: str, app_id: str, batch_id: int, cluster: str | None, start_ms: int | None,
                 end_ms: int | None, suite: str, evaluated: int, failed: list[dict], elapsed_ms: int,
                 details: dict) -> dict:
        readable = "; ".join(
            (f"broker {f['broker']}: " if f.get("broker") is not None else "")
            + f["says"]
            + (f" (observed {f['observed']:.4g})" if isinstance(f.get("observed"), (int, float)) else "")
            + (f" [{f['expectation']} on {f['column']}]" if f["column"] else "")
            for f in failed)
        return {"run_id": str(uuid.uuid5(_NAMESPACE, f"{app_id}|{batch_id}|{cluster}|{start_ms}|{end_ms}")),
                "query": query, "batch_id": batch_id, "cluster": cluster, "window_start": _to_dt(start_ms),
                "window_end": _to_dt(end_ms), "suite": suite, "success": not failed, "evaluated": evaluated,
                "failed_expectations": readable or None,
                "details_json": json.dumps({**details, "failures": failed}, default=str),
                "validation_ms": elapsed_ms, "checked_at": datetime.now(timezone.utc)}

    def _write(self, rows: list[dict], app_id: str, batch_id: int) -> None:
        table = pa.Table.from_pylist(rows, schema=arrow_schema("quality_runs"))
        self.lakehouse.append("quality_runs", table, app_id=f"{app_id}-quality", batch_id=batch_id)
