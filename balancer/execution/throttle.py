"""Replication throttles computed per batch and broker (seed 002's method), and a plan's schedule.

Per broker taking part in a batch (:func:`balancer.execution.batches.participants`):

- it **sends** what it must copy as the leader of a moved partition (``bytes_to_move``: one
  copy per new replica) and **receives** one copy per new replica it gets;
- the rate it needs is those bytes over the time left, **plus the produce traffic** (bytes_in)
  of the throttled partitions that the throttle also meters: a leader counts every follower's
  fetch of a throttled partition against its ``leader.replication.throttled.rate`` (in-sync
  followers are not held back, but their bytes use up the quota), so the sender needs bytes_in
  once per follower of the partition during the move (old and new replicas but itself); a
  receiver's ``follower.replication.throttled.rate`` meters only its new replica, which must
  keep up with producers besides copying the log (bytes_in once). A throttle at the bare
  backlog rate would never let the new replica catch up;
- the rate is capped by the broker's spare network capacity, ``capacity x capacity_threshold -
  current load``: the send side against network_out, the receive side against network_in. The
  existing followers' replication is already part of the sender's current load, so the cap on
  its rate is the spare capacity plus that traffic (only the rest is new load).

Kafka applies one rate per broker to both of its throttled directions
(``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``, which is
what ``kafka-reassign-partitions.sh --throttle`` sets), so a broker's rate is the larger of its
two needs, capped by the tighter of the safe limits of the directions it uses.

A broker with no spare capacity (at or above ``capacity_threshold`` already; typically the hot
broker the plan is relieving) still gets a floor, :data:`FLOOR_CAPACITY_SHARE` of its capacity
above the produce traffic its throttle meters: with no throttle at all the move would
never finish and the hot spot never go away, and 1% of a NIC is a load no broker notices. The
note says so in an operator's words.

Pure Python: no Spark, no I/O. Rates in bytes/s, sizes in bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from balancer.planner.actions import Action
from balancer.vocabulary import ActionKind

from .batches import Batch

FLOOR_CAPACITY_SHARE = 0.01  # of the broker's capacity in that direction, above its produce traffic
# Kafka reads a throttle of 0 as "replicate nothing": a move with nothing to copy and no produce
# traffic (an empty, idle partition) still gets this much, so it completes.
MIN_RATE = 1000.0  # bytes/s
_SLACK = 1e-9  # relative tolerance when comparing durations with the time allowed


@dataclass(frozen=True)
class BrokerLoad:
    """A broker's current network load and capacity, bytes/s."""

    network_in: float
    network_out: float
    capacity_network_in: float
    capacity_network_out: float

    def __post_init__(self) -> None:
        for name in ("network_in", "network_out", "capacity_network_in", "capacity_network_out"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"BrokerLoad.{name} must be a finite number >= 0, got {value!r}")
            if name.startswith("capacity") and value == 0:
                raise ValueError(f"BrokerLoad.{name} must be > 0, got {value!r}")
            object.__setattr__(self, name, float(value))


@dataclass(frozen=True)
class BatchThrottle:
    batch: int
    rate_by_broker: Mapping[int, float]  # bytes/s: the replication throttle to set on each broker
    send_bytes: Mapping[int, int]  # per broker: bytes it sends as leader of moved partitions
    receive_bytes: Mapping[int, int]  # per broker: bytes its new replicas receive
    estimated_seconds: float  # at rate_by_broker: the slowest broker's time
    meets_deadline: bool  # estimated_seconds <= the time the batch was given
    note: str | None = None  # for the operator: deadline missed, brokers without spare capacity


@dataclass(frozen=True)
class Schedule:
    throttles: tuple[BatchThrottle, ...]
    estimated_seconds: float  # all batches one after the other
    meets_deadline: bool
    deadline_seconds: float
    note: str | None = None


def _mb(rate: float) -> str:
    return f"{rate / 1e6:.3g} MB/s"


def _check_positive(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _check_threshold(capacity_threshold: object) -> float:
    if (
        isinstance(capacity_threshold, bool)
        or not isinstance(capacity_threshold, (int, float))
        or not 0.0 < capacity_threshold <= 1.0
    ):
        raise ValueError(f"capacity_threshold must be a number in (0.0, 1.0], got {capacity_threshold!r}")
    return float(capacity_threshold)


def _traffic(partition_traffic: Mapping[tuple[str, int], float], action: Action) -> float:
    key = (action.topic, action.partition)
    if key not in partition_traffic:
        raise ValueError(
            f"partition_traffic has no bytes_in for {action.topic}-{action.partition}, "
            "a partition of this batch"
        )
    value = partition_traffic[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"partition_traffic[{key!r}] must be a finite number >= 0, got {value!r}")
    return float(value)


def compute_throttle(
    batch: Batch,
    *,
    seconds_left: float,
    broker_load: Mapping[int, BrokerLoad],
    capacity_threshold: float,
    partition_traffic: Mapping[tuple[str, int], float],
) -> BatchThrottle:
    """The replication throttle per broker for ``batch`` to finish within ``seconds_left``.

    ``broker_load``: every participating broker's current load and capacity;
    ``partition_traffic``: bytes_in (B/s) of every partition the batch moves. A leadership batch
    moves no data: no throttle, 0 s. If a broker cannot reach the rate the deadline needs within
    its spare capacity, the batch gets the safe (capped) rate, ``meets_deadline`` is False and
    ``estimated_seconds`` is the duration at that rate; the note says which brokers limit it.
    """
    if not isinstance(batch, Batch):
        raise TypeError(f"batch must be a Batch, got {type(batch).__name__}")
    seconds_left = _check_positive("seconds_left", seconds_left)
    capacity_threshold = _check_threshold(capacity_threshold)
    if batch.kind == ActionKind.LEADERSHIP or not batch.actions:
        return BatchThrottle(batch.index, {}, {}, {}, 0.0, True, None)

    send: dict[int, int] = {}
    receive: dict[int, int] = {}
    metered_send: dict[int, float] = {}  # produce traffic the sender's throttle meters (every follower)
    flowing_send: dict[int, float] = {}  # of which already in its current load (the old followers)
    metered_receive: dict[int, float] = {}  # produce traffic each new replica fetches
    for action in batch.actions:
        added = set(action.new_replicas) - set(action.old_replicas)
        per_copy = action.bytes_to_move // len(added) if added else 0
        bytes_in = _traffic(partition_traffic, action)
        leader = action.old_leader  # leads until the new replicas are in sync: every copy comes from it
        followers = len(set(action.old_replicas) | set(action.new_replicas)) - 1
        send[leader] = send.get(leader, 0) + action.bytes_to_move
        metered_send[leader] = metered_send.get(leader, 0.0) + bytes_in * followers
        flowing_send[leader] = flowing_send.get(leader, 0.0) + bytes_in * (len(action.old_replicas) - 1)
        for b in added:
            receive[b] = receive.get(b, 0) + per_copy
            metered_receive[b] = metered_receive.get(b, 0.0) + bytes_in

    rates: dict[int, float] = {}
    seconds = 0.0
    limited: list[str] = []
    no_spare: list[str] = []
    for b in sorted(batch.brokers):
        load = broker_load.get(b)
        if not isinstance(load, BrokerLoad):
            raise ValueError(
                f"broker_load has no BrokerLoad for broker {b}, which takes part in batch {batch.index}"
            )
        # Per direction: (backlog bytes, metered produce B/s, safe limit B/s, spare B/s, capacity B/s, name).
        sides = []
        if b in send:
            spare = load.capacity_network_out * capacity_threshold - load.network_out
            sides.append(
                (
                    send[b],
                    metered_send[b],
                    spare + flowing_send[b],
                    spare,
                    load.capacity_network_out,
                    "network_out",
                )
            )
        if b in receive:
            spare = load.capacity_network_in * capacity_threshold - load.network_in
            sides.append(
                (receive[b], metered_receive[b], spare, spare, load.capacity_network_in, "network_in")
            )
        need = max(backlog / seconds_left + metered for backlog, metered, *_ in sides)
        limit = min(side[2] for side in sides)
        floor = max(metered + FLOOR_CAPACITY_SHARE * cap for _, metered, _, _, cap, _ in sides)
        rate = max(min(need, max(limit, floor)), MIN_RATE)
        rates[b] = rate
        for backlog, metered, side_limit, spare, cap, direction in sides:
            if backlog:
                seconds = max(seconds, backlog / (rate - metered))
            if rate > max(side_limit, 0.0) + _SLACK * cap:  # only the floor sets a rate above the safe limit
                no_spare.append(
                    f"broker {b} has {'no' if spare <= 0 else 'too little'} spare {direction} "
                    f"({_mb(max(spare, 0.0))} left below {capacity_threshold:.0%} of capacity)"
                )
        if rate < need * (1 - _SLACK):
            limited.append(f"broker {b} ({_mb(rate)} of {_mb(need)} needed)")

    meets = seconds <= seconds_left * (1 + _SLACK)
    parts = []
    if not meets:
        parts.append(
            f"batch {batch.index} cannot finish in {seconds_left:.0f} s within spare network capacity: "
            f"at the safe throttle it takes {seconds:.0f} s, limited by " + ", ".join(limited)
        )
    if no_spare:
        parts.append(
            "; ".join(no_spare) + f": throttle held at a floor of {FLOOR_CAPACITY_SHARE:.0%} of capacity "
            "above the moved partitions' produce traffic so the move still progresses; it adds load to a "
            "broker already at its limit, so watch it or run this batch off-peak"
        )
    return BatchThrottle(batch.index, rates, send, receive, seconds, meets, ". ".join(parts) or None)


def plan_schedule(
    batches: Sequence[Batch],
    *,
    deadline_seconds: float,
    broker_load: Mapping[int, BrokerLoad],
    capacity_threshold: float,
    partition_traffic: Mapping[tuple[str, int], float],
) -> Schedule:
    """Each batch's throttle, the time to ``deadline_seconds`` split across batches in proportion
    to their bytes (leadership batches move none and get none; their seconds are negligible).

    Batches run one after another; the schedule meets the deadline when their estimated
    durations add up to no more than ``deadline_seconds``.
    """
    deadline_seconds = _check_positive("deadline_seconds", deadline_seconds)
    capacity_threshold = _check_threshold(capacity_threshold)
    batches = list(batches)
    for i, batch in enumerate(batches):
        if not isinstance(batch, Batch):
            raise TypeError(f"batches[{i}] must be a Batch, got {type(batch).__name__}")
    total = sum(b.bytes_to_move for b in batches if b.kind != ActionKind.LEADERSHIP)
    moving = [b for b in batches if b.kind != ActionKind.LEADERSHIP and b.actions]
    throttles = []
    for batch in batches:
        if batch.kind == ActionKind.LEADERSHIP or not batch.actions:
            share = 0.0
        elif total:
            share = deadline_seconds * batch.bytes_to_move / total
        else:
            share = deadline_seconds / len(moving)  # only empty partitions to move: equal shares
        # A batch of empty partitions moves no backlog: its time does not matter, only its produce traffic.
        throttles.append(
            compute_throttle(
                batch,
                seconds_left=share or deadline_seconds,
                broker_load=broker_load,
                capacity_threshold=capacity_threshold,
                partition_traffic=partition_traffic,
            )
        )
    seconds = sum(t.estimated_seconds for t in throttles)
    meets = seconds <= deadline_seconds * (1 + _SLACK)
    note = (
        None
        if meets
        else (
            f"the plan cannot finish within the deadline of {deadline_seconds:.0f} s within spare "
            f"network capacity: at the safe throttles it takes {seconds:.0f} s"
        )
    )
    return Schedule(tuple(throttles), seconds, meets, deadline_seconds, note)
