"""The executor's :class:`~balancer.execution.executor.ExecutionStore` on the Delta tables, with delta-rs.

No Spark: a plan is a few small tables' rows, read with their filters pushed to delta-rs' file
statistics, and ``plan_executions`` is appended one small commit at a time.

**A plan is never acted on half-seen.** The job commits a plan's ``balance_plans`` row, then its
``plan_actions``, then (after tracking) its ``plan_batches``: separate Delta commits, so for a moment
a reader sees a proposed plan without its actions or batches, or with them still being written. The
plan's own row says what it holds (``leader_moves``: leadership actions, ``replica_moves``: replicas
added over all other actions, ``bytes_to_move``), so :meth:`DeltaPlanStore.load_plan` acts only when
the actions add up to those figures and the batches add up to the actions (indices 0..n-1, every
action in exactly one batch, the same bytes); otherwise it raises :class:`PlanIncompleteError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from balancer.storage import Storage

from .executor import (
    BatchKind,
    BatchSpec,
    ExecutionError,
    Lifecycle,
    PlanIncompleteError,
    PlanToRun,
)
from .export import ExportError, _rows
from .records import ExecutionRecord

TABLE = "plan_executions"


class DeltaPlanStore:
    """The plan tables under ``storage``'s root; ``table_properties`` for ``plan_executions`` when this
    store creates it (the job creates it with the others otherwise)."""

    def __init__(self, storage: Storage, *, table_properties: dict[str, str] | None = None):
        self.storage = storage
        self.table_properties = table_properties or {}

    # -- reads -----------------------------------------------------------------------------------------

    def _read(self, table: str, plan_id: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        import pyarrow.dataset as ds
        from deltalake import DeltaTable

        path, options = self.storage.join(table), self.storage.delta_options()
        if not DeltaTable.is_deltatable(path, storage_options=options):
            return []
        dataset = DeltaTable(path, storage_options=options).to_pyarrow_dataset()
        rows: list[dict[str, Any]] = dataset.to_table(
            columns=columns, filter=ds.field("plan_id") == plan_id
        ).to_pylist()
        return rows

    def load_plan(self, plan_id: str) -> PlanToRun:
        plans = self._read("balance_plans", plan_id)
        if not plans:
            raise ExecutionError(f"plan {plan_id} is not in balance_plans under {self.storage.root}")
        plan = plans[0]
        if plan["status"] != "proposed":
            raise ExecutionError(
                f"plan {plan_id} is {plan['status']!r}, not a proposed plan: nothing to execute"
            )
        actions = self._read("plan_actions", plan_id)
        batches = self._read("plan_batches", plan_id)
        check_whole(plan, actions, batches)
        try:
            rows = _rows(batches, None)
        except ExportError as error:
            raise ExecutionError(f"plan {plan_id}: {error}") from None
        specs = []
        for row in rows:
            reassignment = row["reassignment"] or {"partitions": []}
            election = row["election"] or {"partitions": []}
            specs.append(
                BatchSpec(
                    index=row["batch"],
                    kind=BatchKind(row["kind"]),
                    actions=int(row["actions"] or 0),
                    bytes_to_move=int(row["bytes_to_move"] or 0),
                    throttle=dict(row["throttle"]),
                    estimated_seconds=row["estimated_seconds"],
                    targets={
                        (p["topic"], p["partition"]): tuple(p["replicas"]) for p in reassignment["partitions"]
                    },
                    elect=tuple((p["topic"], p["partition"]) for p in election["partitions"]),
                )
            )
        return PlanToRun(plan_id, plan["cluster"], tuple(specs))

    def lifecycle(self, plan_id: str) -> Lifecycle:
        events = self._read("plan_events", plan_id, ["window_end", "recorded_at", "status"])
        if not events:
            return Lifecycle.PROPOSED
        floor = datetime.min.replace(tzinfo=UTC)
        latest = max(events, key=lambda e: (e["window_end"] or floor, e["recorded_at"] or floor))
        return Lifecycle(latest["status"])

    def executions(self, plan_id: str) -> list[ExecutionRecord]:
        return [ExecutionRecord.from_row(r) for r in self._read(TABLE, plan_id)]

    # -- writes ----------------------------------------------------------------------------------------

    def record(self, records: Sequence[ExecutionRecord]) -> None:
        from deltalake import DeltaTable, write_deltalake

        from balancer.spark.lakehouse import arrow_schema

        schema = arrow_schema(TABLE)
        path, options = self.storage.join(TABLE), self.storage.delta_options()
        if self.storage.local:
            from pathlib import Path

            Path(self.storage.root).mkdir(parents=True, exist_ok=True)
        DeltaTable.create(
            path,
            schema=schema,
            mode="ignore",
            name=TABLE,
            configuration=self.table_properties or None,
            storage_options=options,
        )
        data = pa.Table.from_pylist([r.row() for r in records], schema=schema)
        # merge: a table created before a column was added (throttled_replicas) gains it on the next append.
        write_deltalake(path, data, mode="append", schema_mode="merge", storage_options=options)


def check_whole(plan: dict[str, Any], actions: list[dict[str, Any]], batches: list[dict[str, Any]]) -> None:
    """Raise :class:`PlanIncompleteError` unless ``actions`` and ``batches`` are all of ``plan``'s rows."""
    plan_id = plan["plan_id"]
    leaderships = sum(1 for a in actions if a["action"] == "leadership")
    replicas = sum(
        len(set(a["new_replicas"] or ()) - set(a["old_replicas"] or ()))
        for a in actions
        if a["action"] != "leadership"
    )
    action_bytes = sum(int(a["bytes_to_move"] or 0) for a in actions)
    problems = []
    if (leaderships, replicas) != (plan["leader_moves"] or 0, plan["replica_moves"] or 0) or action_bytes != (
        plan["bytes_to_move"] or 0
    ):
        problems.append(
            f"plan_actions holds {leaderships} leadership and {replicas} replica move(s) of "
            f"{plan['leader_moves']} and {plan['replica_moves']}"
        )
    indices = sorted(int(b["batch"]) for b in batches)
    batched = sum(int(b["actions"] or 0) for b in batches)
    batch_bytes = sum(int(b["bytes_to_move"] or 0) for b in batches)
    if (
        not batches
        or indices != list(range(len(batches)))
        or batched != len(actions)
        or batch_bytes != action_bytes
    ):
        problems.append(
            f"plan_batches holds {len(batches)} batch(es) covering {batched} of {len(actions)} action(s)"
        )
    if problems:
        raise PlanIncompleteError(
            f"plan {plan_id} is not whole in the lakehouse yet ({'; '.join(problems)}): the job commits a "
            "plan's tables one after another; run execute again in a few seconds"
        )
