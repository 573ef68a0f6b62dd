"""Plan tracking in the job: what ``balancer.execution.lifecycle`` needs, read from the Delta tables
and from the windows being closed, and what it decides, as table rows.

All of it is small and goes through the driver: the state is each cluster's latest proposed plan
(``balance_plans``), that plan's latest ``plan_events`` row, its actions (``plan_actions``) and
whether its outcome was measured (``plan_outcomes``); the observed topology is ``partition_load``
restricted to the tracked plans' partitions (a broadcast join, then collected).

The state is read as of the batch's start: rows of windows ending at or before the windows the
batch closes. A batch replayed after a crash therefore decides what it decided before, even if
some of its rows landed, and its appends (keyed by app id and batch id) skip what is there.

Over 500 lines because the reads (``read_latest``, ``stored_infos``, ``gate``, ``settle``) and the rows
written from the lifecycle's decisions (``event_rows``, ``batch_rows``, ``outcome_rows``) share one record
of a plan (``PlanInfo``) and its columns; they are the two halves a split would take apart.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from balancer.config import Config
from balancer.execution.lifecycle import ClusterTrack, Observed, Outcome, PlanState
from balancer.execution.verdict import PLANNED
from balancer.planner.actions import Action
from balancer.spark.lakehouse import Filter, Lakehouse
from balancer.spark.windows import loads
from balancer.vocabulary import RESOURCES, PlanStatus

log = logging.getLogger(__name__)

WindowKey = tuple[str, int]  # (cluster, window_end epoch ms)


def _ms(column: str, alias: str | None = None):
    return F.unix_millis(F.col(column)).alias(alias or f"{column}_ms")


@dataclass(frozen=True)
class PlanInfo:
    """One balance_plans row as tracking needs it (actions only for proposed plans)."""

    plan_id: str
    cluster: str
    window_start_ms: int
    window_ms: int
    status: str
    actions: tuple[Action, ...]
    before: Mapping[str, float | None]
    after: Mapping[str, float | None]


@dataclass(frozen=True)
class Latest:
    """A cluster's latest proposed plan before the batch, and where its lifecycle stands."""

    info: PlanInfo
    state: PlanState
    outcome_due: bool


def _action(row) -> Action:
    return Action(
        kind=row["action"],
        topic=row["topic"],
        partition=int(row["partition"]),
        old_replicas=tuple(row["old_replicas"]),
        new_replicas=tuple(row["new_replicas"]),
        old_leader=int(row["old_leader"]),
        new_leader=int(row["new_leader"]),
        bytes_to_move=int(row["bytes_to_move"] or 0),
    )


_FIGURES = tuple(f"{r}_{when}" for r in RESOURCES for when in ("before", "after"))
_PLAN_COLUMNS = ("plan_id", "cluster", "window_start", "window_end", "status", *_FIGURES)
_ACTION_COLUMNS = (
    "plan_id",
    "seq",
    "action",
    "topic",
    "partition",
    "old_replicas",
    "new_replicas",
    "old_leader",
    "new_leader",
    "bytes_to_move",
)


def _epoch_ms(stamp: datetime) -> int:
    # Aware from Lakehouse.select; naive local time from Spark's collect, which .timestamp() inverts exactly.
    return round(stamp.timestamp() * 1000)


def _small_read(
    lakehouse: Lakehouse,
    table: str,
    columns: Iterable[str],
    *,
    plan_ids: list[str] | None = None,
    proposed: bool = False,
    after_ms: int | None = None,
    until_ms: int | None = None,
) -> list[dict]:
    """Rows of a small plan table to the driver (``Lakehouse.select``: no Spark job on delta-rs), with
    ``window_end_ms`` / ``window_start_ms`` added."""
    filters: list[Filter] = []
    if plan_ids is not None:
        filters.append(("plan_id", "in", plan_ids))
    if proposed:
        filters.append(("status", "=", PlanStatus.PROPOSED.value))
    if after_ms is not None:
        filters.append(("window_end", ">", datetime.fromtimestamp(after_ms / 1000, UTC)))
    if until_ms is not None:
        filters.append(("window_end", "<=", datetime.fromtimestamp(until_ms / 1000, UTC)))
    rows = lakehouse.select(table, list(columns), filters).to_pylist()
    for row in rows:
        for name in ("window_start", "window_end"):
            if row.get(name) is not None:
                row[f"{name}_ms"] = _epoch_ms(row[name])
    return rows


def _infos(plans: list[dict], actions: Mapping[str, list[Action]]) -> list[PlanInfo]:
    return [
        PlanInfo(
            r["plan_id"],
            r["cluster"],
            r["window_start_ms"],
            r["window_end_ms"],
            r["status"],
            tuple(actions.get(r["plan_id"], ())),
            {k: r[f"{k}_before"] for k in RESOURCES},
            {k: r[f"{k}_after"] for k in RESOURCES},
        )
        for r in plans
    ]


def _actions_by_plan(rows: Iterable) -> dict[str, list[Action]]:
    by_plan: dict[str, list[Action]] = defaultdict(list)
    for a in sorted(rows, key=lambda a: (a["plan_id"], a["seq"])):
        by_plan[a["plan_id"]].append(_action(a))
    return by_plan


def planned_infos(plan_rows: DataFrame) -> list[PlanInfo]:
    """The planner's rows (with their ``actions`` array), collected once."""
    rows = []
    actions = []
    for r in plan_rows.select(*_PLAN_COLUMNS, "actions").collect():
        row = r.asDict(recursive=True)
        for name in ("window_start", "window_end"):
            row[f"{name}_ms"] = _epoch_ms(row[name])
        rows.append(row)
        actions += [{**a, "plan_id": row["plan_id"]} for a in row.pop("actions") or []]
    return _infos(rows, _actions_by_plan(actions))


def stored_infos(lakehouse: Lakehouse, after_ms: int | None, until_ms: int) -> list[PlanInfo]:
    """balance_plans rows of windows ending in (after, until] with their actions, as landed."""
    plans = _small_read(lakehouse, "balance_plans", _PLAN_COLUMNS, after_ms=after_ms, until_ms=until_ms)
    proposed = [r["plan_id"] for r in plans if r["status"] == PlanStatus.PROPOSED]
    actions = _small_read(lakehouse, "plan_actions", _ACTION_COLUMNS, plan_ids=proposed) if proposed else []
    return _infos(plans, _actions_by_plan(actions))


def read_latest(lakehouse: Lakehouse, until_ms: int | None) -> dict[str, Latest]:
    """Per cluster, its latest proposed plan among windows ending at or before ``until_ms`` (only that
    one can still be open: plans are made one at a time), with its latest event."""
    if until_ms is None:
        return {}
    newest: dict[str, dict] = {}
    for row in _small_read(lakehouse, "balance_plans", _PLAN_COLUMNS, proposed=True, until_ms=until_ms):
        if row["cluster"] not in newest or row["window_end_ms"] > newest[row["cluster"]]["window_end_ms"]:
            newest[row["cluster"]] = row
    if not newest:
        return {}
    ids = [r["plan_id"] for r in newest.values()]
    infos = _infos(
        list(newest.values()),
        _actions_by_plan(_small_read(lakehouse, "plan_actions", _ACTION_COLUMNS, plan_ids=ids)),
    )
    events: dict[str, dict] = {}
    for e in _small_read(
        lakehouse,
        "plan_events",
        ("plan_id", "window_end", "status", "actions_done", "bytes_done", "detail", "recorded_at"),
        plan_ids=ids,
        until_ms=until_ms,
    ):
        seen = events.get(e["plan_id"])
        if seen is None or (e["window_end_ms"], _epoch_ms(e["recorded_at"]) if e["recorded_at"] else 0) > (
            seen["window_end_ms"],
            _epoch_ms(seen["recorded_at"]) if seen["recorded_at"] else 0,
        ):
            events[e["plan_id"]] = e
    measured = {
        r["plan_id"]
        for r in _small_read(
            lakehouse, "plan_outcomes", ("plan_id", "window_end"), plan_ids=ids, until_ms=until_ms
        )
    }
    out = {}
    for info in infos:
        event = events.get(info.plan_id)
        state = PlanState(info.plan_id, info.cluster, info.window_ms, len(info.actions))
        if event is not None:
            # Events are appended only when status or progress changes: the latest one is the TTL's clock.
            state = PlanState(
                info.plan_id,
                info.cluster,
                info.window_ms,
                len(info.actions),
                status=event["status"],
                window_ms=event["window_end_ms"],
                since_ms=event["window_end_ms"],
                actions_done=event["actions_done"] or 0,
                bytes_done=event["bytes_done"] or 0,
                detail=event["detail"],
            )
        out[info.cluster] = Latest(
            info, state, state.status == PlanStatus.COMPLETED and info.plan_id not in measured
        )
    return out


def window_keys(*frames: DataFrame) -> list[tuple[str, int, int]]:
    """(cluster, window_start ms, window_end ms) of every window in ``frames``, in window order.
    The sink passes broker_load only (small): a window without any broker report is skipped by
    the planner anyway, and silence tells nothing about a plan's progress."""
    keys = set()
    for frame in frames:
        keys |= {
            tuple(r)
            for r in frame.select("cluster", _ms("window_start"), _ms("window_end")).distinct().collect()
        }
    return sorted(keys, key=lambda k: (k[0], k[2]))


def topology(partitions: DataFrame, wanted: Mapping[str, Iterable[tuple[str, int]]]) -> dict[WindowKey, dict]:
    """Observed replicas and leader of the ``wanted`` partitions (per cluster), per window in
    ``partitions``."""
    keys = sorted({(cluster, topic, int(p)) for cluster, parts in wanted.items() for topic, p in parts})
    out: dict[WindowKey, dict] = defaultdict(dict)
    if not keys:
        return out
    wanted_frame = partitions.sparkSession.createDataFrame(
        keys, "cluster string, topic string, partition int"
    )
    rows = (
        partitions.join(F.broadcast(wanted_frame), ["cluster", "topic", "partition"])
        .select("cluster", _ms("window_end"), "topic", "partition", "replicas", "leader")
        .collect()
    )
    for r in rows:
        out[(r["cluster"], r["window_end_ms"])][(r["topic"], r["partition"])] = Observed(
            tuple(r["replicas"] or ()), r["leader"]
        )
    return out


def walk(
    latest: Mapping[str, Latest],
    windows: list[tuple[str, int, int]],
    observed: Mapping[WindowKey, dict],
    config: Config,
    results: Mapping[WindowKey, PlanInfo] | None = None,
) -> tuple[dict[WindowKey, str], list[ClusterTrack]]:
    """Each cluster's closing windows in window order: which must wait (with the reason) and the
    lifecycle tracks (events, outcomes). ``results``: the windows' plans; without them (before
    planning), no window is taken to propose, which gives every window an earlier plan blocks;
    with them, a proposed plan also blocks the cluster's later windows."""
    ttl_ms = config.executor.proposal_ttl.ms
    min_ms = config.balancer.min_plan_interval.ms
    waiting: dict[WindowKey, str] = {}
    tracks = []
    by_cluster: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for cluster, start_ms, end_ms in windows:
        by_cluster[cluster].append((start_ms, end_ms))
    for cluster in sorted(by_cluster):
        known = latest.get(cluster)
        track = ClusterTrack(
            cluster,
            ttl_ms,
            min_ms,
            state=known.state if known else None,
            actions=known.info.actions if known else (),
            outcome_due=known.outcome_due if known else False,
        )
        for start_ms, end_ms in sorted(by_cluster[cluster], key=lambda w: w[1]):
            reason = track.observe(start_ms, end_ms, observed.get((cluster, end_ms), {}))
            if reason is not None:
                waiting[(cluster, end_ms)] = reason
                continue
            result = (results or {}).get((cluster, end_ms))
            if result is not None and result.status == PlanStatus.PROPOSED:
                track.decide(result.plan_id, result.actions)
        tracks.append(track)
    return waiting, tracks


def event_rows(tracks: Iterable[ClusterTrack]) -> list[dict]:
    now = datetime.now(UTC)
    return [
        {
            "plan_id": e.plan_id,
            "cluster": e.cluster,
            "window_end_ms": e.window_ms,
            "status": e.status,
            "actions_done": e.actions_done,
            "actions_total": e.actions_total,
            "bytes_done": int(e.bytes_done),
            "detail": e.detail,
            "recorded_at": now,
        }
        for t in tracks
        for e in t.events
    ]


def arrow(table: str, rows: list[dict]):
    """``rows`` as an Arrow table of ``table``'s columns (written by the driver: no Spark job);
    ``window_end_ms`` (epoch ms) becomes ``window_end``."""
    import pyarrow as pa

    from balancer.spark.lakehouse import arrow_schema

    schema = arrow_schema(table)
    data = [
        {**r, "window_end": datetime.fromtimestamp(r["window_end_ms"] / 1000, UTC)}
        if "window_end_ms" in r
        else r
        for r in rows
    ]
    return pa.Table.from_pylist([{name: r.get(name) for name in schema.names} for r in data], schema=schema)


# -- plan_batches --------------------------------------------------------------------------------


def batch_rows(
    info: PlanInfo, broker_rows: list, traffic: Mapping[tuple[str, int], float], config: Config
) -> list[dict]:
    """``plan_batches`` rows of a proposed plan: ``balancer.execution``'s batches and throttles.

    ``broker_rows``: the plan window's broker_load rows (current load and capacity);
    ``traffic``: bytes_in per moved partition (the throttle also carries its produce traffic).
    """
    from balancer.execution import BrokerLoad, plan_schedule, split_batches
    from balancer.execution.export import batch_rows as export_rows

    executor = config.executor
    batches = split_batches(
        info.actions,
        max_leadership_moves=executor.max_leadership_moves,
        max_partition_moves_per_broker=executor.max_partition_moves_per_broker,
        max_partition_moves=executor.max_partition_moves,
    )
    broker_load = {
        int(r["broker"]): BrokerLoad(
            float(r["network_in"] or 0.0),
            float(r["network_out"] or 0.0),
            float(r["capacity_network_in"]),
            float(r["capacity_network_out"]),
        )
        for r in broker_rows
        if (r["capacity_network_in"] or 0) > 0 and (r["capacity_network_out"] or 0) > 0
    }
    try:
        schedule = plan_schedule(
            batches,
            deadline_seconds=executor.deadline.seconds,
            broker_load=broker_load,
            capacity_threshold=config.balancer.capacity_threshold,
            partition_traffic=traffic,
        )
        throttles, plan_note = list(schedule.throttles), schedule.note
    except (KeyError, ValueError) as exc:  # e.g. a broker without a capacity report in that window
        log.warning("plan %s: no throttle computed: %s", info.plan_id, exc)
        throttles, plan_note = None, f"no throttle computed: {exc}"
    rows = export_rows(batches, throttles, plan_id=info.plan_id, cluster=info.cluster)
    for i, row in enumerate(rows):
        throttle = throttles[i] if throttles else None
        row["throttle"] = (
            json.dumps({str(b): r for b, r in row["throttle"].items()}) if row["throttle"] else None
        )
        row["meets_deadline"] = throttle.meets_deadline if throttle else None
        notes = [throttle.note if throttle else None, plan_note if i == len(rows) - 1 else None]
        row["note"] = ". ".join(n for n in notes if n) or None
    return rows


# -- plan_outcomes -------------------------------------------------------------------------------


def _relative(
    loads_by_broker: Mapping[int, Mapping[str, float]], capacity: Mapping[int, Mapping[str, float]]
) -> dict[str, dict[int, float]]:
    """Per resource and broker: utilization / the cluster's utilization (Σ load / Σ capacity); an idle
    resource is 1.0 everywhere, as the planner's balance figure has it."""
    out: dict[str, dict[int, float]] = {}
    brokers = [b for b in capacity if all((capacity[b].get(r) or 0) > 0 for r in RESOURCES)]
    for r in RESOURCES:
        total_load = sum(loads_by_broker.get(b, {}).get(r) or 0.0 for b in brokers)
        total_cap = sum(capacity[b][r] for b in brokers)
        average = total_load / total_cap if total_cap else 0.0
        out[r] = {
            b: ((loads_by_broker.get(b, {}).get(r) or 0.0) / capacity[b][r] / average) if average > 0 else 1.0
            for b in brokers
        }
    return out


def _window(frame_: DataFrame, cluster: str, window_ms: int) -> DataFrame:
    return frame_.where((F.col("cluster") == cluster) & (F.unix_millis("window_end") == F.lit(window_ms)))


def outcome_rows(outcome: Outcome, info: PlanInfo, broker_frame, partition_frame) -> list[dict]:
    """``plan_outcomes`` rows: ``broker_frame(window_ms)`` / ``partition_frame(window_ms)`` give that
    window's broker_load / partition_load rows of any cluster (cached or read back)."""
    cluster = info.cluster
    realized_rows = _window(broker_frame(outcome.window_ms), cluster, outcome.window_ms).collect()
    before_rows = _window(broker_frame(info.window_ms), cluster, info.window_ms).collect()
    spark = partition_frame(info.window_ms).sparkSession
    targets = spark.createDataFrame(
        [(a.topic, a.partition, list(a.new_replicas), a.new_leader) for a in info.actions]
        or [("", -1, [], None)],
        "topic string, partition int, _replicas array<int>, _leader int",
    )
    moved = (
        _window(partition_frame(info.window_ms), cluster, info.window_ms)
        .join(F.broadcast(targets), ["topic", "partition"], "left")
        .withColumn("replicas", F.coalesce("_replicas", "replicas"))
        .withColumn("leader", F.coalesce("_leader", "leader"))
        .withColumn("replication_factor", F.size("replicas"))
    )
    predicted_rows = loads.hosted_load(moved).collect()

    def capacity(rows) -> dict[int, dict[str, float]]:
        return {r["broker"]: {k: r[f"capacity_{k}"] for k in RESOURCES} for r in rows}

    def load(rows) -> dict[int, dict[str, float]]:
        return {r["broker"]: {k: r[k] for k in RESOURCES} for r in rows}

    before = _relative(load(before_rows), capacity(before_rows))
    predicted = _relative(load(predicted_rows), capacity(before_rows))
    realized = _relative(load(realized_rows), capacity(realized_rows))
    traffic_before = sum((r["network_in"] or 0.0) + (r["network_out"] or 0.0) for r in before_rows)
    traffic_after = sum((r["network_in"] or 0.0) + (r["network_out"] or 0.0) for r in realized_rows)
    change = traffic_after / traffic_before - 1.0 if traffic_before else None
    rows = []
    for r in RESOURCES:
        rows.append(
            {
                "plan_id": info.plan_id,
                "cluster": cluster,
                "window_end_ms": outcome.window_ms,
                "resource": r,
                "broker": None,
                "before": info.before[r],
                "predicted": info.after[r],
                "realized": max(realized[r].values()) if realized[r] else None,
                "traffic_change": change,
            }
        )
        for b in sorted(set(before[r]) | set(realized[r])):
            rows.append(
                {
                    "plan_id": info.plan_id,
                    "cluster": cluster,
                    "window_end_ms": outcome.window_ms,
                    "resource": r,
                    "broker": int(b),
                    "before": before[r].get(b),
                    "predicted": predicted[r].get(b),
                    "realized": realized[r].get(b),
                    "traffic_change": change,
                }
            )
    return rows


# -- the sink's two steps ------------------------------------------------------------------------


@dataclass
class Gate:
    """Before planning: the state before the batch, its closing windows and what the open plans' partitions
    look like in them, and the windows an open plan holds (``waiting``: (cluster, window_end ms) → reason)."""

    latest: dict[str, Latest]
    windows: list[tuple[str, int, int]]
    observed: dict[WindowKey, dict]
    waiting: dict[WindowKey, str]

    def frame(self, spark) -> DataFrame | None:
        """(cluster, window_end, reason) of the windows to pass as ``waiting`` to ``planning.plans``."""
        if not self.waiting:
            return None
        rows = [(cluster, end_ms, reason) for (cluster, end_ms), reason in sorted(self.waiting.items())]
        return spark.createDataFrame(rows, "cluster string, window_end_ms long, reason string").select(
            "cluster", F.timestamp_millis("window_end_ms").alias("window_end"), "reason"
        )


def gate(
    lakehouse: Lakehouse, config: Config, partitions: DataFrame, brokers: DataFrame, until_ms: int | None
) -> Gate:
    latest = read_latest(lakehouse, until_ms)
    windows = window_keys(brokers)
    observed = topology(
        partitions,
        {
            c: [(a.topic, a.partition) for a in known.info.actions]
            for c, known in latest.items()
            if known.state.is_open
        },
    )
    waiting, _ = walk(latest, windows, observed, config)
    return Gate(latest, windows, observed, waiting)


@dataclass
class Settled:
    """After planning, the batch's windows walked in order with their plans."""

    overrides: list[
        tuple[str, str]
    ]  # (plan_id, reason): planned, but an earlier window's plan holds the cluster
    proposed: list[PlanInfo]  # the batch's plans that stand
    tracks: list[ClusterTrack]
    infos: dict[str, PlanInfo]  # every plan an outcome may need, by id


def settle(gated: Gate, infos: list[PlanInfo], partitions: DataFrame, config: Config) -> Settled:
    results = {(i.cluster, i.window_ms): i for i in infos}
    # A plan proposed in this batch is followed through the cluster's later windows of the batch.
    last = {}
    for cluster, _, end_ms in gated.windows:
        last[cluster] = max(last.get(cluster, end_ms), end_ms)
    new = {
        i.cluster: [(a.topic, a.partition) for a in i.actions]
        for i in infos
        if i.status == PlanStatus.PROPOSED and i.window_ms < last.get(i.cluster, i.window_ms)
    }
    observed = defaultdict(dict, {k: dict(v) for k, v in gated.observed.items()})
    for key, parts in topology(partitions, new).items():
        observed[key].update(parts)
    waiting, tracks = walk(gated.latest, gated.windows, observed, config, results)
    # A window the data contract failed stays skipped (see planning.plan_group).
    overrides = [
        (i.plan_id, waiting[(i.cluster, i.window_ms)])
        for i in infos
        # Any window the planner ran on: a plan of an earlier window holds the cluster.
        if (i.cluster, i.window_ms) in waiting and i.status in PLANNED
    ]
    proposed = [
        i for i in infos if i.status == PlanStatus.PROPOSED and (i.cluster, i.window_ms) not in waiting
    ]
    known = {latest.info.plan_id: latest.info for latest in gated.latest.values()}
    known.update({i.plan_id: i for i in proposed})
    return Settled(overrides, proposed, tracks, known)


def context_rows(
    partitions: DataFrame, brokers: DataFrame, plans: list[PlanInfo]
) -> tuple[dict[str, list], dict[str, dict[tuple[str, int], float]]]:
    """Per plan: its window's broker_load rows, and bytes_in of the partitions it moves (for throttles)."""
    if not plans:
        return {}, {}
    spark = brokers.sparkSession
    keys = spark.createDataFrame(
        [(i.plan_id, i.cluster, i.window_ms) for i in plans],
        "plan_id string, cluster string, window_end_ms long",
    )
    broker_rows: dict[str, list] = defaultdict(list)
    for r in (
        brokers.withColumn("window_end_ms", F.unix_millis("window_end"))
        .join(F.broadcast(keys), ["cluster", "window_end_ms"])
        .collect()
    ):
        broker_rows[r["plan_id"]].append(r)
    moved = [
        (i.plan_id, i.cluster, i.window_ms, a.topic, a.partition)
        for i in plans
        for a in i.actions
        if a.kind != "leadership"
    ]
    traffic: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    if moved:
        wanted = spark.createDataFrame(
            moved, "plan_id string, cluster string, window_end_ms long, topic string, partition int"
        )
        for r in (
            partitions.withColumn("window_end_ms", F.unix_millis("window_end"))
            .join(F.broadcast(wanted), ["cluster", "window_end_ms", "topic", "partition"])
            .select("plan_id", "topic", "partition", "bytes_in")
            .collect()
        ):
            traffic[r["plan_id"]][(r["topic"], r["partition"])] = float(r["bytes_in"] or 0.0)
    return broker_rows, traffic
