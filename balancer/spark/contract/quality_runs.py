"""``quality_runs``: one row per checked (batch, cluster) or (cluster, window), its failures as typed
records, written once per batch; and the failed ingest runs a window's verdict waits for, read back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pyarrow as pa

from balancer.spark.lakehouse import Lakehouse, arrow_schema

_NAMESPACE = uuid.UUID("0c3e5b7a-4f0e-4a43-9d3c-7f0b6f1e2a55")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Which frame a failure was found on; it decides the fields ``Failure.as_json`` keeps for it.
FailureScope = Literal["records", "clusters", "brokers", "verdict"]
_FIELDS: dict[str, tuple[str, ...]] = {
    # per-record expectations: how many records, a sample of their values, or GX's error
    "records": ("unexpected_count", "sample", "error"),
    # the per-cluster frame (quarantine share): the value found and the limit it broke
    "clusters": ("observed", "limit"),
    # the per-broker windows frame: which broker, the value found
    "brokers": ("broker", "observed"),
    # a verdict without a row to point at (an error, or a failed ingest run overlapping a window)
    "verdict": (),
}


@dataclass(frozen=True)
class Failure:
    """One failed expectation, as ``quality_runs`` records it (``details_json.failures``) and reads it
    out (``failed_expectations``)."""

    scope: FailureScope
    expectation: str
    column: str
    says: str
    unexpected_count: int | None = None
    sample: Sequence[Any] = ()
    error: str | None = None
    observed: Any = None
    limit: float | None = None
    broker: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The failure's fields for its scope, in a stable order."""
        fields = {"expectation": self.expectation, "column": self.column, "says": self.says}
        for name in _FIELDS[self.scope]:
            value = getattr(self, name)
            fields[name] = list(value) if name == "sample" else value
        return fields

    def readable(self) -> str:
        """``broker B: says (observed X) [expectation on column]``, each part only when known."""
        return (
            (f"broker {self.broker}: " if self.broker is not None else "")
            + self.says
            + (f" (observed {self.observed:.4g})" if isinstance(self.observed, int | float) else "")
            + (f" [{self.expectation} on {self.column}]" if self.column else "")
        )


def _to_dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


def _epoch_ms(stamp: datetime) -> int:
    """An aware datetime as epoch ms, floored like Spark's ``unix_millis``."""
    return (stamp - _EPOCH) // timedelta(milliseconds=1)


def run_row(
    query: Literal["ingest", "balance"],
    app_id: str,
    batch_id: int,
    cluster: str | None,
    start_ms: int | None,
    end_ms: int | None,
    *,
    suite: str,
    evaluated: int,
    failed: Sequence[Failure],
    elapsed_ms: int,
    details: dict,
) -> dict:
    """One ``quality_runs`` row. Its run id is the same whenever the same writer checks the same batch
    and scope again (a replay)."""
    readable = "; ".join(f.readable() for f in failed)
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
        "details_json": json.dumps({**details, "failures": [f.as_json() for f in failed]}, default=str),
        "validation_ms": elapsed_ms,
        "checked_at": datetime.now(UTC),
    }


@dataclass(frozen=True)
class FailedIngestRun:
    """A failed ingest run as a window's verdict needs it: its records' event-time span (epoch ms)."""

    cluster: str
    batch_id: int
    first_ms: int | None
    last_ms: int | None
    failed_expectations: str | None


class QualityRuns:
    """Writes ``quality_runs`` (once per writer and batch) and reads the failed ingest runs back."""

    def __init__(self, lakehouse: Lakehouse):
        self.lakehouse = lakehouse

    def write(self, rows: list[dict], app_id: str, batch_id: int) -> None:
        table = pa.Table.from_pylist(rows, schema=arrow_schema("quality_runs"))
        self.lakehouse.append("quality_runs", table, app_id=f"{app_id}-quality", batch_id=batch_id)

    def failed_ingest(self, since_ms: int, until_ms: int, clusters: list[str]) -> list[FailedIngestRun]:
        """Failed ingest runs of ``clusters`` that may overlap [since_ms, until_ms). Files whose statistics
        rule the range out are not read (``Lakehouse.select``)."""
        table = self.lakehouse.select(
            "quality_runs",
            ["cluster", "batch_id", "window_start", "window_end", "failed_expectations"],
            [
                ("query", "=", "ingest"),
                ("window_end", ">=", _to_dt(since_ms)),
                ("window_start", "<", _to_dt(until_ms)),
                ("success", "=", False),
                ("cluster", "in", clusters),
            ],
        )
        return [
            FailedIngestRun(
                run["cluster"],
                run["batch_id"],
                None if run["window_start"] is None else _epoch_ms(run["window_start"]),
                None if run["window_end"] is None else _epoch_ms(run["window_end"]),
                run["failed_expectations"],
            )
            for run in table.to_pylist()
        ]
