"""Carrying a plan out on a Kafka cluster: the logic of ``balancer execute``, against two small ports.

One module, over 500 lines, because its safety rules below are one state machine: each rule guards a
step of the others (a throttle recorded before it is set, removed before the next batch, a plan checked
before each batch), and a reader checks them together.

- :class:`ClusterAdmin`: the Admin API calls it needs (ListPartitionReassignments,
  AlterPartitionReassignments, ElectLeaders, IncrementalAlterConfigs, DescribeConfigs, metadata, log
  dir sizes). The adapter is ``balancer.execution.kafka_admin``.
- :class:`ExecutionStore`: the plan as the lakehouse holds it (``balance_plans``, ``plan_actions``,
  ``plan_batches``, the job's ``plan_events``) and the ``plan_executions`` record. The adapter is
  ``balancer.execution.store``.

Rules, in the order a run applies them:

0. One run per plan: a run claims the plan before anything else and holds it while it runs
   (``balancer.execution.lease``); a second ``balancer execute`` of a plan that a live run holds refuses,
   naming the holder, and changes nothing (its clean-up would remove the throttles of the batch in flight).
1. A plan is acted on only when it is whole in the lakehouse (the store checks the action and batch
   counts against the plan's own figures) and is ``proposed`` (the job's lifecycle: no event yet, or
   ``executing``). The lifecycle is read again before every batch: a plan that became ``superseded``,
   ``diverged``, ``expired`` (or ``completed``) is not carried further.
2. The state is the lakehouse's, never this process's memory: a batch is done when it has a
   ``completed`` row in ``plan_executions``, and a run starts at the first batch that has none.
3. Throttles are recorded (a ``started`` row naming every broker rate and topic it will set) before
   they are set, and removed before the batch's end is recorded. So whatever kills a run, the record
   names every throttle it may have left; the next start removes them first.
4. A reassignment in progress that this plan did not start stops the run before it changes anything,
   naming it: two reassignments on one cluster share bandwidth no throttle was computed for.
5. Per replica batch: the batch's computed rate on exactly its brokers (``leader.`` and
   ``follower.replication.throttled.rate``), the moving replicas added to their topics'
   ``leader.``/``follower.replication.throttled.replicas`` (Kafka's own rule: the current replicas on
   the leader side, the added ones on the follower side), AlterPartitionReassignments, then
   ListPartitionReassignments polled until none of the batch's partitions is in progress and the
   metadata shows the targets, then a preferred election where the plan's leader was already a
   replica, then the throttles removed. Throttles an operator set stay theirs (Cruise Control's rule): a
   broker that already has a rate keeps it (the batch sets none there), an entry already in a list is
   not the batch's, and only what the batch set is recorded and removed.
6. A batch that stalls (a broker of the batch leaves the cluster, or no added replica grows and no
   partition finishes for ``stall_seconds``), is stopped (``--stop``) or fails: its reassignments are
   cancelled (Kafka reverts them), its throttles removed, the outcome recorded, and the run ends.
   A broker that is down cannot have its own rate removed (the request goes to that broker); the
   topics' throttled-replica lists, which are what make a rate apply to any replica, are removed,
   and the next start removes the rate once the broker is back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from . import lease
from .records import PLAN_LEVEL, ExecutionRecord, Outcome

TopicPartition = tuple[str, int]
# topic -> (leader entries, follower entries) of its throttled-replica lists, each "partition:broker"
ThrottledReplicas = Mapping[str, tuple[Sequence[str], Sequence[str]]]
# Kafka's throttle keys: each broker's rates, each topic's (leader, follower) throttled-replica lists.
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


class ExecutionError(RuntimeError):
    """The executor refused or stopped; the message says why in the operator's words."""


class PlanIncompleteError(ExecutionError):
    """The plan's rows are not all committed yet (the job writes its tables one after another)."""


class BatchKind(StrEnum):
    LEADERSHIP = "leadership"
    REPLICA_MOVE = "replica_move"


class Lifecycle(StrEnum):
    """The job's view of a plan (``plan_events.status``); PROPOSED when it has no event yet."""

    PROPOSED = "proposed"
    EXECUTING = "executing"
    COMPLETED = "completed"
    DIVERGED = "diverged"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"


ACTIONABLE = frozenset({Lifecycle.PROPOSED, Lifecycle.EXECUTING})


@dataclass(frozen=True)
class BatchSpec:
    """One ``plan_batches`` row, as the executor carries it out."""

    index: int
    kind: BatchKind
    actions: int
    bytes_to_move: int
    throttle: Mapping[int, int]  # broker -> bytes/s (empty for leadership batches)
    estimated_seconds: float | None
    targets: Mapping[TopicPartition, tuple[int, ...]]  # the reassignment: partition -> replicas, leader first
    elect: tuple[TopicPartition, ...]  # preferred election after the reassignment

    @property
    def brokers(self) -> frozenset[int]:
        return frozenset(self.throttle) | frozenset(b for replicas in self.targets.values() for b in replicas)


@dataclass(frozen=True)
class PlanToRun:
    plan_id: str
    cluster: str
    batches: tuple[BatchSpec, ...]


@dataclass(frozen=True)
class PartitionState:
    replicas: tuple[int, ...]
    leader: int | None


@dataclass(frozen=True)
class Reassigning:
    """A partition with a reassignment in progress (ListPartitionReassignments)."""

    replicas: tuple[int, ...]  # the union Kafka keeps while it moves
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)


class ClusterAdmin(Protocol):
    """The Admin API calls the executor makes. Errors per broker or partition come back as text."""

    def live_brokers(self) -> set[int]: ...

    def partitions(self, topics: Iterable[str]) -> dict[TopicPartition, PartitionState]: ...

    def reassignments(self) -> dict[TopicPartition, Reassigning]: ...

    def reassign(self, targets: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, str]:
        """AlterPartitionReassignments; None cancels. Returns the partitions the cluster refused, why."""
        ...

    def elect_preferred(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """ElectLeaders (preferred); an election that was not needed is no error."""
        ...

    def set_throttles(self, rates: Mapping[int, int], replicas: ThrottledReplicas) -> None:
        """Sets each broker's rate (leader and follower) and adds the entries to each topic's (leader,
        follower) throttled-replica lists, keeping the entries already there."""
        ...

    def remove_throttles(
        self, brokers: Iterable[int], replicas: ThrottledReplicas, whole_topics: Iterable[str] = ()
    ) -> dict[str, str]:
        """Deletes the brokers' rate keys, takes the entries out of the topics' lists (deleting a list left
        empty) and deletes ``whole_topics``' lists; returns the resources it could not reach
        ("broker 3": why)."""
        ...

    def throttles(self, brokers: Iterable[int], topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """The throttle keys set on each resource ("broker 1", "topic orders"), from DescribeConfigs."""
        ...

    def replica_bytes(self, replicas: Mapping[int, Iterable[TopicPartition]]) -> int:
        """The bytes the given replicas hold (DescribeLogDirs), summed; brokers that do not answer count 0."""
        ...


class ExecutionStore(Protocol):
    def load_plan(self, plan_id: str) -> PlanToRun:
        """The whole plan, or :class:`PlanIncompleteError` / :class:`ExecutionError` naming what is
        missing."""
        ...

    def lifecycle(self, plan_id: str) -> Lifecycle: ...

    def executions(self, plan_id: str) -> list[ExecutionRecord]: ...

    def record(self, records: Sequence[ExecutionRecord]) -> None: ...


@dataclass(frozen=True, kw_only=True)
class ExecuteOptions:
    poll_seconds: float = 2.0  # between ListPartitionReassignments polls
    stall_seconds: float = 120.0  # no added replica grows and no partition finishes for this long
    fallback_throttle: int | None = None  # bytes/s, for replica batches the plan has no computed throttle
    # A run renews its hold on the plan every third of this; a run on another host that has not renewed
    # for this long is taken as dead (one on this host is checked by its process id at once).
    lease_seconds: float = 60.0

    def __post_init__(self) -> None:
        for name in ("poll_seconds", "stall_seconds", "lease_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
        value = self.fallback_throttle
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ValueError(f"fallback_throttle must be a positive int (bytes/s) or None, got {value!r}")


@dataclass(frozen=True)
class BatchResult:
    index: int
    kind: str
    measured_seconds: float
    estimated_seconds: float | None

    @property
    def ratio(self) -> float | None:
        return ratio(self.measured_seconds, self.estimated_seconds)


@dataclass
class RunReport:
    plan_id: str
    run_id: str
    skipped: list[int] = field(default_factory=list)  # batches done by earlier runs
    ran: list[BatchResult] = field(default_factory=list)
    cleaned: list[int] = field(default_factory=list)  # open batches of dead runs whose throttles were removed


class _AbortError(Exception):
    def __init__(self, outcome: Outcome, detail: str):
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


def ratio(measured: float, estimated: float | None) -> float | None:
    return measured / estimated if estimated and estimated > 0 else None


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def throttled_replicas(
    targets: Mapping[TopicPartition, Sequence[int]], current: Mapping[TopicPartition, PartitionState]
) -> dict[str, tuple[list[str], list[str]]]:
    """Per topic, the ``leader.`` and ``follower.replication.throttled.replicas`` values for moving
    ``targets`` away from ``current`` (Kafka's reassignment tool's rule: every current replica may
    lead the copy, every added replica follows it). Partitions whose broker set stays the same (a
    reorder) move no data and are left out."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for (topic, partition), target in sorted(targets.items()):
        state = current.get((topic, partition))
        if state is None:
            raise ExecutionError(f"partition {topic}-{partition} of the plan is not in the cluster")
        added = [b for b in target if b not in state.replicas]
        if not added:
            continue
        leaders, followers = out.setdefault(topic, ([], []))
        leaders += [f"{partition}:{b}" for b in state.replicas]
        followers += [f"{partition}:{b}" for b in added]
    return out


def merged_replicas(
    rows: Iterable[ThrottledReplicas],
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """The union of several records' throttled-replica entries, per topic and side."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    for replicas in rows:
        for topic, (leaders, followers) in replicas.items():
            lead, follow = out.setdefault(topic, (set(), set()))
            lead.update(leaders)
            follow.update(followers)
    return {t: (tuple(sorted(lead)), tuple(sorted(follow))) for t, (lead, follow) in sorted(out.items())}


def open_batches(history: Sequence[ExecutionRecord]) -> dict[int, ExecutionRecord]:
    """Batches whose latest row is ``started``: a run died in them, its throttles may still be set."""
    latest: dict[int, ExecutionRecord] = {}
    for record in sorted(history, key=lambda r: r.recorded_at):
        if record.batch != PLAN_LEVEL:
            latest[record.batch] = record
    return {b: r for b, r in latest.items() if r.outcome is Outcome.STARTED}


def completed_batches(history: Sequence[ExecutionRecord]) -> set[int]:
    return {r.batch for r in history if r.outcome is Outcome.COMPLETED}


class Executor:
    """Runs plans with ``admin`` against the cluster and ``store`` for the plan and its record.

    ``clock`` (epoch seconds), ``sleep`` and ``say`` (progress lines) are the process's by default.
    """

    def __init__(
        self,
        admin: ClusterAdmin,
        store: ExecutionStore,
        *,
        options: ExecuteOptions | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        say: Callable[[str], None] = print,
    ):
        self.admin = admin
        self.store = store
        self.options = options or ExecuteOptions()
        self.clock = clock
        self.sleep = sleep
        self.say = say
        self._renewed = 0.0  # when this executor's run last wrote its claim (clock seconds)

    # -- entry points ----------------------------------------------------------------------------------

    def run(self, plan_id: str) -> RunReport:
        plan = self.store.load_plan(plan_id)
        run_id = str(uuid.uuid4())
        history = self._claim(plan, run_id)
        try:
            return self._run(plan, run_id, history)
        finally:
            self._release(plan, run_id)

    def _run(self, plan: PlanToRun, run_id: str, history: Sequence[ExecutionRecord]) -> RunReport:
        """``history``: the plan's executions as read after this run's claim was written."""
        plan_id = plan.plan_id
        report = RunReport(plan_id, run_id)
        # Clean-up comes before every check: a plan that may not go on still must not leave a throttle.
        report.cleaned = self._clean_up(plan, run_id, history)
        self._check_lifecycle(plan, "before its first batch")
        done = completed_batches(history)
        todo = [b for b in plan.batches if b.index not in done]
        report.skipped = sorted(done)
        if not todo:
            self.say(f"plan {plan_id}: every batch is done ({len(plan.batches)})")
            return report
        self._refuse_foreign(plan, todo[0])
        run_started = self.clock()
        if done:
            self.say(
                f"plan {plan_id}: batches {sorted(done)} done by an earlier run; resuming at {todo[0].index}"
            )
        for batch in todo:
            if self._stop_requested(plan_id, run_started):
                raise ExecutionError(f"plan {plan_id}: stopped on request before batch {batch.index}")
            self._check_lifecycle(plan, f"before batch {batch.index}")
            self._renew(plan, run_id)
            self._fill_throttle(plan, batch)
            report.ran.append(self._run_batch(plan, run_id, batch, run_started))
        self.say(f"plan {plan_id}: all {len(plan.batches)} batches done")
        return report

    def dry_run(self, plan_id: str) -> list[str]:
        """What :meth:`run` would do now, as lines; changes nothing on the cluster or in the lakehouse."""
        plan = self.store.load_plan(plan_id)
        lines = [f"plan {plan_id} on cluster {plan.cluster}: {len(plan.batches)} batch(es) (dry run)"]
        lifecycle = self.store.lifecycle(plan_id)
        if lifecycle not in ACTIONABLE:
            lines.append(f"  the plan is {lifecycle}: execute would refuse")
        history = self.store.executions(plan_id)
        done = completed_batches(history)
        for index, record in sorted(open_batches(history).items()):
            lines.append(
                f"  first: remove the throttles batch {index} left (run {record.run_id}): brokers "
                f"{sorted(record.throttle or {})}, topics {list(record.throttled_topics)}"
            )
        todo = [b for b in plan.batches if b.index not in done]
        if todo:
            foreign = self._foreign(plan, todo[0])
            if foreign:
                lines.append("  execute would refuse: " + foreign)
        topics = {tp[0] for b in todo for tp in b.targets}
        current = self.admin.partitions(topics) if topics else {}
        for batch in plan.batches:
            head = (
                f"  batch {batch.index}: {batch.kind}, {batch.actions} action(s), {_mb(batch.bytes_to_move)}"
            )
            if batch.index in done:
                lines.append(head + ": done")
                continue
            if batch.kind is BatchKind.REPLICA_MOVE:
                rates = batch.throttle or self._fallback_rates(batch)
                lines.append(
                    head
                    + f", estimated {batch.estimated_seconds or 0:.0f} s; throttle "
                    + ", ".join(f"broker {b} {_mb(r)}/s" for b, r in sorted(rates.items()))
                )
                for topic, (leaders, followers) in throttled_replicas(batch.targets, current).items():
                    lines.append(
                        f"    topic {topic}: leader.replication.throttled.replicas={','.join(leaders)} "
                        f"follower.replication.throttled.replicas={','.join(followers)}"
                    )
            else:
                lines.append(head)
            for tp, replicas in sorted(batch.targets.items()):
                now = current.get(tp)
                lines.append(
                    f"    reassign {_tp(tp)}: {list(now.replicas) if now else '?'} -> {list(replicas)}"
                )
            if batch.elect:
                lines.append("    preferred election: " + ", ".join(_tp(tp) for tp in batch.elect))
        return lines

    def stop(self, plan_id: str) -> list[int]:
        """Record a stop request (a running executor ends at its next poll), cancel the reassignments
        of the batch in flight and remove its throttles. Returns the batches stopped."""
        plan = self.store.load_plan(plan_id)
        run_id = str(uuid.uuid4())
        now = self._now()
        self.store.record(
            [
                ExecutionRecord(
                    plan_id=plan_id,
                    cluster=plan.cluster,
                    run_id=run_id,
                    batch=PLAN_LEVEL,
                    outcome=Outcome.STOP_REQUESTED,
                    recorded_at=now,
                    detail="balancer execute --stop",
                )
            ]
        )
        history = self.store.executions(plan_id)
        stopped = []
        by_index = {b.index: b for b in plan.batches}
        for index, started in sorted(open_batches(history).items()):
            batch = by_index[index]
            cancelled = self._cancel(batch)
            left = self._removable(started)
            detail = f"stopped on request; {len(cancelled)} reassignment(s) cancelled (they revert)"
            self._end(plan, run_id, batch, started, Outcome.STOPPED, detail + self._left_text(left))
            stopped.append(index)
        return stopped

    # -- the plan's lease (rule 0) -------------------------------------------------------------------------

    def _plan_row(self, plan: PlanToRun, run_id: str, outcome: Outcome, detail: str) -> None:
        self.store.record(
            [
                ExecutionRecord(
                    plan_id=plan.plan_id,
                    cluster=plan.cluster,
                    run_id=run_id,
                    batch=PLAN_LEVEL,
                    outcome=outcome,
                    recorded_at=self._now(),
                    detail=detail,
                )
            ]
        )

    def _claim(self, plan: PlanToRun, run_id: str) -> list[ExecutionRecord]:
        """Hold the plan for this run, or raise naming the live run that holds it. Checked again once this
        run's claim is written: of two claims made at once, the older keeps the plan. Returns the plan's
        executions as that second check read them."""
        self._refuse_held(plan, run_id)
        self._plan_row(plan, run_id, Outcome.RUNNING, lease.Claim.detail(*lease.this_process()))
        self._renewed = self.clock()
        try:
            return self._refuse_held(plan, run_id)
        except ExecutionError:
            self._release(plan, run_id)
            raise

    def _refuse_held(self, plan: PlanToRun, run_id: str) -> list[ExecutionRecord]:
        """Raise if another live run holds the plan; else the plan's executions as read for the check."""
        history = self.store.executions(plan.plan_id)
        other = lease.holder(history, now=self._now(), lease_seconds=self.options.lease_seconds, me=run_id)
        if other is not None:
            age = (self._now() - other.seen).total_seconds()
            raise ExecutionError(
                f"plan {plan.plan_id} is being executed by run {other.run_id} ({other.text}, seen "
                f"{age:.0f} s ago): follow it in plan_executions, or stop it with balancer execute "
                f"{plan.plan_id} --stop; a run that died on another host is taken over "
                f"{self.options.lease_seconds:.0f} s after it was last seen"
            )
        return history

    def _renew(self, plan: PlanToRun, run_id: str) -> None:
        if self.clock() - self._renewed >= self.options.lease_seconds / 3:
            self._plan_row(plan, run_id, Outcome.RUNNING, lease.Claim.detail(*lease.this_process()))
            self._renewed = self.clock()

    def _release(self, plan: PlanToRun, run_id: str) -> None:
        self._plan_row(plan, run_id, Outcome.RELEASED, "the run ended")

    # -- checks ----------------------------------------------------------------------------------------

    def _check_lifecycle(self, plan: PlanToRun, when: str) -> None:
        status = self.store.lifecycle(plan.plan_id)
        if status not in ACTIONABLE:
            raise ExecutionError(
                f"plan {plan.plan_id} is {status} (plan_events), no longer proposed or executing: "
                f"not executed {when}"
            )

    def _stop_requested(self, plan_id: str, since: float) -> bool:
        return any(
            r.outcome is Outcome.STOP_REQUESTED and r.recorded_at.timestamp() >= since
            for r in self.store.executions(plan_id)
        )

    def _foreign(self, plan: PlanToRun, batch: BatchSpec) -> str | None:
        """The reassignments in progress that are not ``batch``'s own (a resumed batch's are)."""
        foreign = [
            (tp, r)
            for tp, r in sorted(self.admin.reassignments().items())
            if set(batch.targets.get(tp, ())) != set(r.target)
        ]
        if not foreign:
            return None
        shown = ", ".join(
            f"{_tp(tp)} to {list(r.target)} (adding {list(r.adding)}, removing {list(r.removing)})"
            for tp, r in foreign[:5]
        )
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        return (
            f"a reassignment this plan did not start is in progress on the cluster: {shown}{more}; wait for "
            "it to finish or cancel it (kafka-reassign-partitions.sh --cancel), then run execute again"
        )

    def _refuse_foreign(self, plan: PlanToRun, batch: BatchSpec) -> None:
        foreign = self._foreign(plan, batch)
        if foreign:
            raise ExecutionError(f"plan {plan.plan_id}: {foreign}")

    def _fill_throttle(self, plan: PlanToRun, batch: BatchSpec) -> None:
        if (
            batch.kind is BatchKind.REPLICA_MOVE
            and not batch.throttle
            and self.options.fallback_throttle is None
        ):
            raise ExecutionError(
                f"plan {plan.plan_id}: batch {batch.index} moves replicas and the plan has no computed "
                "throttle for it; replica moves never run unthrottled: give one rate "
                "(--throttle BYTES_PER_SEC)"
            )

    def _fallback_rates(self, batch: BatchSpec) -> dict[int, int]:
        rate = self.options.fallback_throttle
        return {b: rate for b in sorted(batch.brokers)} if rate else {}

    # -- cleanup ---------------------------------------------------------------------------------------

    def _clean_up(self, plan: PlanToRun, run_id: str, history: Sequence[ExecutionRecord]) -> list[int]:
        """Remove every throttle the plan's ``started`` rows name (idempotent: a delete of an unset key
        is no change), then close the batches a dead run left open."""
        rows = [r for r in history if r.outcome is Outcome.STARTED]
        brokers = {b: 0 for r in rows for b in (r.throttle or {})}
        replicas = merged_replicas(r.throttled_replicas for r in rows if r.throttled_replicas)
        whole = {t for r in rows if r.throttled_replicas is None for t in r.throttled_topics}
        left = self._remove(brokers, replicas, whole) if brokers or replicas or whole else {}
        if left:
            self.say(f"plan {plan.plan_id}: throttles not removed yet: {self._left_text(left).lstrip('; ')}")
        by_index = {b.index: b for b in plan.batches}
        cleaned = []
        for index, started in sorted(open_batches(history).items()):
            detail = "its run ended without recording an outcome; throttles removed at the next start"
            self._end(
                plan, run_id, by_index[index], started, Outcome.INTERRUPTED, detail + self._left_text(left)
            )
            self.say(
                f"plan {plan.plan_id}: batch {index} was left open by run {started.run_id}: throttles removed"
            )
            cleaned.append(index)
        return cleaned

    def _remove(
        self, rates: Mapping[int, int], replicas: ThrottledReplicas, whole_topics: Iterable[str] = ()
    ) -> dict[str, str]:
        return self.admin.remove_throttles(sorted(rates), replicas, sorted(set(whole_topics)))

    def _removable(self, started: ExecutionRecord) -> dict[str, str]:
        """Remove what a ``started`` row names (rows from before throttled_replicas: the whole lists)."""
        whole = started.throttled_topics if started.throttled_replicas is None else ()
        return self._remove(started.throttle or {}, started.throttled_replicas or {}, whole)

    def _own_throttles(
        self, rates: Mapping[int, int], replicas: ThrottledReplicas
    ) -> tuple[dict[int, int], dict[str, tuple[tuple[str, ...], tuple[str, ...]]], dict[int, str]]:
        """Of the rates and entries a batch wants, those it sets itself (rule 5): the rates of brokers that
        have none, the entries not already listed; and the brokers that keep a rate set before (its value)."""
        current = self.admin.throttles(rates, replicas) if rates or replicas else {}
        kept = {b: next(iter(current[f"broker {b}"].values())) for b in rates if current.get(f"broker {b}")}
        own_rates = {b: r for b, r in rates.items() if b not in kept}
        own: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        for topic, sides in replicas.items():
            listed = current.get(f"topic {topic}", {})
            present = [set(listed.get(key, "").split(",")) for key in REPLICA_KEYS]
            new = tuple(
                tuple(e for e in entries if e not in there)
                for entries, there in zip(sides, present, strict=True)
            )
            if new[0] or new[1]:
                own[topic] = (new[0], new[1])
        return own_rates, own, kept

    @staticmethod
    def _left_text(left: Mapping[str, str]) -> str:
        if not left:
            return ""
        return "; not reachable, removed at the next start: " + ", ".join(
            f"{k} ({v})" for k, v in left.items()
        )

    def _cancel(self, batch: BatchSpec) -> list[TopicPartition]:
        inflight = self.admin.reassignments()
        mine = [tp for tp in batch.targets if tp in inflight]
        if mine:
            self.admin.reassign({tp: None for tp in mine})
        return mine

    # -- one batch -------------------------------------------------------------------------------------

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def _end(
        self,
        plan: PlanToRun,
        run_id: str,
        batch: BatchSpec,
        started: ExecutionRecord,
        outcome: Outcome,
        detail: str | None,
        measured: float | None = None,
    ) -> None:
        now = self._now()
        self.store.record(
            [
                ExecutionRecord(
                    plan_id=plan.plan_id,
                    cluster=plan.cluster,
                    run_id=run_id,
                    batch=batch.index,
                    kind=str(batch.kind),
                    outcome=outcome,
                    recorded_at=now,
                    started_at=started.started_at,
                    ended_at=now,
                    actions=batch.actions,
                    bytes_to_move=batch.bytes_to_move,
                    throttle=started.throttle,
                    throttled_topics=started.throttled_topics,
                    throttled_replicas=started.throttled_replicas,
                    estimated_seconds=batch.estimated_seconds,
                    measured_seconds=measured,
                    duration_ratio=ratio(measured, batch.estimated_seconds) if measured is not None else None,
                    detail=detail,
                )
            ]
        )

    def _run_batch(self, plan: PlanToRun, run_id: str, batch: BatchSpec, run_started: float) -> BatchResult:
        rates: dict[int, int] = {}
        topics: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        kept: dict[int, str] = {}
        current = self.admin.partitions({tp[0] for tp in batch.targets}) if batch.targets else {}
        if batch.kind is BatchKind.REPLICA_MOVE:
            wanted = dict(batch.throttle) or self._fallback_rates(batch)
            rates, topics, kept = self._own_throttles(wanted, throttled_replicas(batch.targets, current))
        begun = self.clock()
        started = ExecutionRecord(
            plan_id=plan.plan_id,
            cluster=plan.cluster,
            run_id=run_id,
            batch=batch.index,
            kind=str(batch.kind),
            outcome=Outcome.STARTED,
            recorded_at=datetime.fromtimestamp(begun, UTC),
            started_at=datetime.fromtimestamp(begun, UTC),
            actions=batch.actions,
            bytes_to_move=batch.bytes_to_move,
            throttle=rates or None,
            throttled_topics=tuple(sorted(topics)),
            throttled_replicas=topics if batch.kind is BatchKind.REPLICA_MOVE else None,
            estimated_seconds=batch.estimated_seconds,
        )
        self.store.record([started])  # before any throttle is set (rule 3)
        self.say(
            f"batch {batch.index}: {batch.kind}, {batch.actions} action(s), {_mb(batch.bytes_to_move)}"
            + (
                ", throttle " + ", ".join(f"broker {b} {_mb(r)}/s" for b, r in sorted(rates.items()))
                if rates
                else ""
            )
            + "".join(
                f", broker {b} keeps the rate set before ({_mb(float(v))}/s)" for b, v in sorted(kept.items())
            )
        )
        try:
            if rates or topics:
                self.admin.set_throttles(rates, topics)
            pending = {
                tp: replicas
                for tp, replicas in batch.targets.items()
                if tuple(current[tp].replicas) != tuple(replicas)
            }
            inflight = self.admin.reassignments()
            submit = {
                tp: r for tp, r in pending.items() if tp not in inflight or inflight[tp].target != tuple(r)
            }
            if submit:
                refused = self.admin.reassign(submit)
                if refused:
                    raise _AbortError(
                        Outcome.FAILED,
                        "the cluster refused the reassignment of "
                        + ", ".join(f"{_tp(tp)} ({why})" for tp, why in sorted(refused.items())),
                    )
            self._wait(plan, run_id, batch, pending, run_started)
            if batch.elect:
                refused = self.admin.elect_preferred(batch.elect)
                if refused:
                    raise _AbortError(
                        Outcome.FAILED,
                        "the preferred leader election failed for "
                        + ", ".join(f"{_tp(tp)} ({why})" for tp, why in sorted(refused.items())),
                    )
        except _AbortError as abort:
            cancelled = self._cancel(batch)
            left = self._remove(rates, topics)
            detail = abort.detail + (
                f"; {len(cancelled)} reassignment(s) cancelled (they revert)" if cancelled else ""
            )
            self._end(plan, run_id, batch, started, abort.outcome, detail + self._left_text(left))
            removed = "throttles removed" if not left else "throttles removed where reachable"
            raise ExecutionError(
                f"plan {plan.plan_id}: batch {batch.index} {abort.outcome}: {detail}; {removed}; "
                f"run balancer execute {plan.plan_id} again to resume"
            ) from None
        except Exception as error:
            # A client or cluster error mid-batch: stop safely where the cluster still answers; if it does
            # not, the started row stays the last word and the next start removes the throttles.
            self._cancel(batch)
            left = self._remove(rates, topics)
            self._end(plan, run_id, batch, started, Outcome.FAILED, f"{error}" + self._left_text(left))
            raise
        left = self._remove(rates, topics)
        if left:  # the started row stays the last word: the next start removes what is left
            raise ExecutionError(
                f"plan {plan.plan_id}: batch {batch.index} is done but its throttles could not all be "
                f"removed{self._left_text(left)}"
            )
        measured = self.clock() - begun
        self._end(plan, run_id, batch, started, Outcome.COMPLETED, None, measured)
        result = BatchResult(batch.index, str(batch.kind), measured, batch.estimated_seconds)
        estimate = (
            f" (estimated {batch.estimated_seconds:.1f} s, ratio {result.ratio:.2f})"
            if result.ratio is not None and batch.estimated_seconds
            else ""
        )
        self.say(f"batch {batch.index}: done in {measured:.1f} s{estimate}")
        return result

    def _wait(
        self,
        plan: PlanToRun,
        run_id: str,
        batch: BatchSpec,
        pending: Mapping[TopicPartition, tuple[int, ...]],
        run_started: float,
    ) -> None:
        """Until every partition of ``pending`` has left ListPartitionReassignments and the metadata shows
        its target set; raises :class:`_AbortError` on a stall or a stop request."""
        if not pending:
            return
        topics = {tp[0] for tp in pending}
        last_progress = self.clock()
        last_left: int | None = None
        last_bytes = -1
        while True:
            inflight = self.admin.reassignments()
            left = {tp: inflight[tp] for tp in pending if tp in inflight}
            if not left:
                state = self.admin.partitions(topics)
                if all(tp in state and set(state[tp].replicas) == set(r) for tp, r in pending.items()):
                    return
            if self._stop_requested(plan.plan_id, run_started):
                raise _AbortError(Outcome.STOPPED, "stopped on request (balancer execute --stop)")
            self._renew(plan, run_id)
            live = self.admin.live_brokers()
            down = sorted(batch.brokers - live)
            if down:
                raise _AbortError(
                    Outcome.STALLED,
                    f"broker(s) {down} of the batch left the cluster with {len(left)} partition(s) "
                    "still moving",
                )
            adding: dict[int, list[TopicPartition]] = {}
            for tp, r in left.items():
                for b in r.adding:
                    adding.setdefault(b, []).append(tp)
            copied = self.admin.replica_bytes(adding) if adding else 0
            now = self.clock()
            if last_left is None or len(left) < last_left or copied > last_bytes:
                last_progress = now
            last_left, last_bytes = len(left), max(copied, last_bytes)
            if now - last_progress > self.options.stall_seconds:
                raise _AbortError(
                    Outcome.STALLED,
                    f"no added replica grew and no partition finished for {self.options.stall_seconds:.0f} s "
                    f"({len(left)} partition(s) still moving: "
                    + ", ".join(_tp(tp) for tp in sorted(left)[:5])
                    + ")",
                )
            self.sleep(self.options.poll_seconds)


def measured_line(result: BatchResult) -> str:
    """A batch's measured duration beside its estimate, as ``balancer execute`` ends with them."""
    if result.ratio is None:
        return f"batch {result.index}: {result.measured_seconds:.1f} s"
    return (
        f"batch {result.index}: {result.measured_seconds:.1f} s measured, "
        f"{result.estimated_seconds:.1f} s estimated (ratio {result.ratio:.2f})"
    )
