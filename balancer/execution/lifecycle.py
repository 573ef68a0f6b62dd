"""A plan's lifecycle, read from telemetry: the job sees a plan carried out whoever runs it.

Each finalized window, the observed topology of the partitions an open plan touches (replica
list and leader, as ``partition_load`` has them) is compared with the plan's targets:

- ``proposed``  → ``executing`` once some action is observed done, → ``completed`` when all are;
- ``diverged``  a partition of the plan is on a replica set that is neither the old one, the new
  one, nor Kafka's in-flight union of the two: it was moved somewhere the plan did not say;
- ``expired``   no progress (no action observed done, or no change in progress) for
  ``executor.proposal_ttl``;
- ``superseded`` a plan that expired before any action was observed, in the window a new plan
  replaces it (only after the TTL: a proposed plan inside its TTL blocks new plans).

An action is done when the partition's observed replica **set** equals the target set and its
observed **leader** is the target leader. Replica order is not compared: Kafka keeps the order
only to name the preferred leader (``replicas[0]``), and what the plan needs is who leads, which
the telemetry reports directly; a reassignment that lists the same brokers in another order moves
no data. A partition no broker reported in the window is neither done nor diverged (silence is
not evidence). Progress is measured afresh every window, so a move that is undone counts again as
pending.

One plan at a time per cluster: while a plan is open, and for ``balancer.min_plan_interval``
after the window in which it completed (or diverged: the cluster changed either way), a window
is not planned; its ``balance_plans`` row says ``waiting`` and names the plan. A plan that
expired or was superseded does not hold the cluster: nothing of it was carried out lately.

Times are epoch milliseconds of window ends. Pure Python: no Spark, no I/O; the sink feeds it
what the Delta tables say (``balancer.spark.track.tracking``), so a restart loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from balancer.planner.actions import Action
from balancer.vocabulary import PlanStatus

OPEN = (PlanStatus.PROPOSED, PlanStatus.EXECUTING)
CLOSED = (PlanStatus.COMPLETED, PlanStatus.SUPERSEDED, PlanStatus.DIVERGED, PlanStatus.EXPIRED)
# After these the cluster's layout changed: the next plan waits balancer.min_plan_interval.
SETTLING = (PlanStatus.COMPLETED, PlanStatus.DIVERGED)
_SHOWN = 5  # partitions named in a detail text


@dataclass(frozen=True)
class Observed:
    """A partition as one window's telemetry shows it: replicas in assignment order, and its leader."""

    replicas: tuple[int, ...]
    leader: int | None


Topology = Mapping[tuple[str, int], Observed]


def action_state(action: Action, observed: Observed | None) -> str:
    """``done``, ``pending``, ``diverged`` or ``unobserved`` for one action in one window."""
    if observed is None or not observed.replicas:
        return "unobserved"
    now, old, new = set(observed.replicas), set(action.old_replicas), set(action.new_replicas)
    if now == new:
        return "done" if observed.leader == action.new_leader else "pending"
    if now == old:
        return "pending"
    # While Kafka copies, the partition lists the old and the new replicas together.
    if new <= now <= old | new:
        return "pending"
    return "diverged"


@dataclass(frozen=True)
class Progress:
    actions_done: int
    actions_total: int
    bytes_done: int
    unobserved: int
    diverged: tuple[str, ...]  # "topic-partition on [..]: plan [old] -> [new]"


def measure(actions: Sequence[Action], topology: Topology) -> Progress:
    done = bytes_done = unobserved = 0
    diverged = []
    for action in actions:
        observed = topology.get((action.topic, action.partition))
        state = action_state(action, observed)
        if state == "done":
            done += 1
            bytes_done += action.bytes_to_move
        elif state == "unobserved":
            unobserved += 1
        elif state == "diverged" and observed is not None:  # diverged: observed
            diverged.append(
                f"{action.topic}-{action.partition} on {list(observed.replicas)}: plan "
                f"{list(action.old_replicas)} -> {list(action.new_replicas)}"
            )
    return Progress(done, len(actions), bytes_done, unobserved, tuple(diverged))


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class PlanState:
    """A plan's status as of one window (one ``plan_events`` row when it changes)."""

    plan_id: str
    cluster: str
    proposed_ms: int  # window_end of the window the plan was made from
    actions_total: int
    status: PlanStatus = PlanStatus.PROPOSED
    window_ms: int | None = None  # window_end of the window this state was observed in
    since_ms: int | None = (
        None  # window_end when progress last changed (the TTL's clock); proposed_ms at first
    )
    actions_done: int = 0
    bytes_done: int = 0
    detail: str | None = None

    def __post_init__(self) -> None:
        if self.status not in OPEN + CLOSED:
            raise ValueError(f"unknown plan status {self.status!r}")
        object.__setattr__(self, "status", PlanStatus(self.status))  # a table's string, typed
        if self.since_ms is None:
            object.__setattr__(self, "since_ms", self.proposed_ms)

    @property
    def since(self) -> int:
        """``since_ms`` as set: the window_end when progress last changed (the TTL's clock)."""
        assert self.since_ms is not None  # __post_init__ sets it
        return self.since_ms

    @property
    def is_open(self) -> bool:
        return self.status in OPEN

    def key(self) -> tuple[PlanStatus, int, int]:
        return self.status, self.actions_done, self.bytes_done


def advance(
    state: PlanState, actions: Sequence[Action], topology: Topology, window_ms: int, ttl_ms: int
) -> PlanState:
    """The plan's state after the window ending at ``window_ms``. Closed plans, and windows not
    after the plan's own, leave it unchanged."""
    if not state.is_open or window_ms <= state.proposed_ms:
        return state
    progress = measure(actions, topology)
    at = replace(
        state, window_ms=window_ms, actions_done=progress.actions_done, bytes_done=progress.bytes_done
    )
    if progress.diverged:
        shown = "; ".join(progress.diverged[:_SHOWN])
        more = len(progress.diverged) - _SHOWN
        return replace(
            at,
            status=PlanStatus.DIVERGED,
            since_ms=window_ms,
            detail=f"{len(progress.diverged)} partition(s) moved where the plan did not say: {shown}"
            + (f" (and {more} more)" if more > 0 else ""),
        )
    counted = f"{progress.actions_done}/{progress.actions_total} actions observed done"
    if progress.unobserved:
        counted += f", {progress.unobserved} partition(s) not reported in this window"
    if progress.actions_done == progress.actions_total:
        return replace(at, status=PlanStatus.COMPLETED, since_ms=window_ms, detail=counted)
    if (progress.actions_done, progress.bytes_done) != (state.actions_done, state.bytes_done):
        status = (
            PlanStatus.EXECUTING
            if progress.actions_done or state.status == PlanStatus.EXECUTING
            else PlanStatus.PROPOSED
        )
        return replace(at, status=status, since_ms=window_ms, detail=counted)
    if window_ms - state.since >= ttl_ms:
        idle = (
            "no action observed since it was proposed"
            if state.status == PlanStatus.PROPOSED
            else f"no progress since the window ending {_when(state.since)}"
        )
        return replace(at, status=PlanStatus.EXPIRED, detail=f"{idle} ({counted}); proposal_ttl passed")
    return replace(state, window_ms=window_ms)  # unchanged: no event


def supersede(before: PlanState, after: PlanState, by_plan_id: str) -> PlanState:
    """``after`` as ``superseded`` when it expired without any action observed and ``by_plan_id``
    was proposed in the same window; else ``after`` as is."""
    if (
        after.status == PlanStatus.EXPIRED
        and before.status == PlanStatus.PROPOSED
        and after.actions_done == 0
    ):
        return replace(
            after, status=PlanStatus.SUPERSEDED, detail=f"replaced by plan {by_plan_id}; {after.detail}"
        )
    return after


def waiting_reason(state: PlanState | None, window_ms: int, min_interval_ms: int) -> str | None:
    """Why the window ending at ``window_ms`` gets no plan of its own, or None when it may be planned.
    ``state``: the cluster's latest plan, already advanced through that window."""
    if state is None:
        return None
    if state.is_open:
        return (
            f"plan {state.plan_id} is {state.status} ({state.actions_done}/{state.actions_total} actions "
            f"observed done), proposed for the window ending {_when(state.proposed_ms)}"
        )
    if state.status in SETTLING and window_ms - state.since < min_interval_ms:
        return (
            f"plan {state.plan_id} {state.status} in the window ending {_when(state.since)}; the next "
            f"plan waits for the window ending {_when(state.since + min_interval_ms)} (min_plan_interval)"
        )
    return None


@dataclass(frozen=True)
class Outcome:
    """A completed plan to compare with its first full window after completion."""

    plan_id: str
    cluster: str
    plan_window_ms: int
    window_ms: int  # the realized window


@dataclass
class ClusterTrack:
    """One cluster's plans walked through its closing windows, in window order.

    For each window: ``observe`` (advance the latest plan with that window's topology; returns
    why the window must wait, or None), then ``decide`` with the window's plan if it proposed one.
    ``events`` collects the ``plan_events`` rows, ``outcomes`` the windows to measure.
    """

    cluster: str
    ttl_ms: int
    min_interval_ms: int
    state: PlanState | None = None
    actions: Sequence[Action] = ()
    outcome_due: bool = False  # the latest plan completed and its outcome is not measured yet
    events: list[PlanState] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    _before: PlanState | None = None
    _window: tuple[int, int] | None = None

    def observe(self, window_start_ms: int, window_ms: int, topology: Topology) -> str | None:
        if self._window is not None and window_ms <= self._window[1]:
            raise ValueError(f"windows must come in order: {window_ms} after {self._window[1]}")
        self._window = (window_start_ms, window_ms)
        state = self.state
        if state is None:
            return None
        if self.outcome_due and state.status == PlanStatus.COMPLETED and window_start_ms >= state.since:
            self.outcomes.append(Outcome(state.plan_id, state.cluster, state.proposed_ms, window_ms))
            self.outcome_due = False
        self._before = state
        self.state = advance(state, self.actions, topology, window_ms, self.ttl_ms)
        if self.state.key() != state.key():
            self.events.append(self.state)
            self.outcome_due = self.state.status == PlanStatus.COMPLETED
        return waiting_reason(self.state, window_ms, self.min_interval_ms)

    def decide(self, plan_id: str, actions: Sequence[Action]) -> None:
        """The window just observed proposed ``plan_id`` (it was not waiting)."""
        if self._window is None:
            raise ValueError("decide() before observe()")
        if self.state is not None and self.state.is_open:
            raise ValueError(
                f"plan {plan_id} proposed while plan {self.state.plan_id} is {self.state.status}"
            )
        if (
            self.state is not None
            and self._before is not None
            and self.events
            and self.events[-1] is self.state
        ):
            replaced = supersede(self._before, self.state, plan_id)
            if replaced is not self.state:
                self.events[-1] = self.state = replaced
        self.state = PlanState(plan_id, self.cluster, self._window[1], len(actions))
        self.actions = tuple(actions)
        self.outcome_due = False
        self._before = None
