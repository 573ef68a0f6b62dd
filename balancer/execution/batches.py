"""Split a plan's actions into executable batches within concurrency limits (Cruise Control's executor).

Leadership transfers go first: they move no data, take seconds, and already relieve most of a
traffic hot spot. Then replica moves, in batches in which no broker takes part in more than
``max_partition_moves_per_broker`` moves and the batch holds at most ``max_partition_moves``.

Pure Python: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from balancer.planner.actions import Action
from balancer.vocabulary import ActionKind

BatchKind = Literal[ActionKind.LEADERSHIP, ActionKind.REPLICA_MOVE]
REPLICA_KINDS = (ActionKind.REPLICA_MOVE, ActionKind.SWAP)


@dataclass(frozen=True)
class Batch:
    index: int
    kind: BatchKind
    actions: tuple[Action, ...]

    @property
    def bytes_to_move(self) -> int:
        return sum(a.bytes_to_move for a in self.actions)

    @property
    def brokers(self) -> frozenset[int]:
        """The brokers that take part in this batch (see :func:`participants`)."""
        return frozenset(b for a in self.actions for b in participants(a))


def participants(action: Action) -> frozenset[int]:
    """The brokers that take part in a replica move: the leader that sends the data and each
    broker that receives a new replica.

    This is Cruise Control's executor rule (``ExecutionTaskPlanner.isExecutableProposal``: the
    old leader plus ``replicasToAdd``). Followers fetch only from the leader, so the leader
    carries every copy and each receiver writes one; a broker that only drops a replica does no
    copying (the log is deleted asynchronously), so counting it would shrink batches without
    protecting any broker. A leadership transfer has no participants in this sense (no data).
    """
    if action.kind == ActionKind.LEADERSHIP:
        return frozenset()
    return frozenset({action.old_leader}) | (frozenset(action.new_replicas) - frozenset(action.old_replicas))


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def split_batches(
    actions: Iterable[Action],
    *,
    max_leadership_moves: int = 1000,
    max_partition_moves_per_broker: int = 5,
    max_partition_moves: int = 1250,
) -> list[Batch]:
    """The plan's actions as batches: leadership transfers first, then replica moves.

    - Leadership transfers (kind ``leadership``) in plan order, ``max_leadership_moves`` a batch.
    - Replica moves (kinds ``replica_move`` and ``swap``; each swap action is one partition's
      move, its partner partition has an action of its own) packed first-fit in plan order: each
      goes into the earliest replica batch where none of its :func:`participants` already takes
      part in ``max_partition_moves_per_broker`` moves and that holds fewer than
      ``max_partition_moves``, else into a new batch. The planner's order is meaningful (hard
      goals' fixes come before distribution moves), so within a batch actions keep it, and an
      action goes into a later batch than one listed after it only because a broker it needs
      was full; first-fit rather than strict order so that one busy broker does not leave the
      other brokers idle for a whole batch. A half-executed swap is a valid state (each half is
      a valid reassignment on its own).

    Every action lands in exactly one batch; batch indices count from 0 across both kinds.
    Raises ``ValueError`` naming the argument for a limit that is not a positive int, and
    ``TypeError`` for an item of ``actions`` that is not an :class:`Action`.
    """
    _positive_int("max_leadership_moves", max_leadership_moves)
    _positive_int("max_partition_moves_per_broker", max_partition_moves_per_broker)
    _positive_int("max_partition_moves", max_partition_moves)
    leaderships: list[Action] = []
    moves: list[Action] = []
    for i, action in enumerate(actions):
        if not isinstance(action, Action):
            raise TypeError(f"actions[{i}] must be an Action, got {type(action).__name__}")
        (leaderships if action.kind == ActionKind.LEADERSHIP else moves).append(action)

    batches: list[Batch] = []
    for start in range(0, len(leaderships), max_leadership_moves):
        batches.append(
            Batch(
                len(batches), ActionKind.LEADERSHIP, tuple(leaderships[start : start + max_leadership_moves])
            )
        )

    members: list[list[Action]] = []  # replica batch k's actions, in plan order
    counts: list[dict[int, int]] = []  # replica batch k: moves each broker takes part in
    # Per broker, the first replica batch that may still have room for it: a batch's counts only
    # grow, so this only moves forward, and the search for an action starts at the max over its
    # brokers (and over the cluster limit's pointer) instead of at batch 0.
    first_room: dict[int, int] = {}
    first_open = 0  # first batch below max_partition_moves
    for action in moves:
        brokers = participants(action)
        k = max([first_open, *(first_room.get(b, 0) for b in brokers)])
        while k < len(members) and (
            len(members[k]) >= max_partition_moves
            or any(counts[k].get(b, 0) >= max_partition_moves_per_broker for b in brokers)
        ):
            k += 1
        if k == len(members):
            members.append([])
            counts.append({})
        members[k].append(action)
        for b in brokers:
            counts[k][b] = counts[k].get(b, 0) + 1
            while (
                first_room.get(b, 0) < len(members)
                and counts[first_room.get(b, 0)].get(b, 0) >= max_partition_moves_per_broker
            ):
                first_room[b] = first_room.get(b, 0) + 1
        while first_open < len(members) and len(members[first_open]) >= max_partition_moves:
            first_open += 1
    for group in members:
        batches.append(Batch(len(batches), ActionKind.REPLICA_MOVE, tuple(group)))
    return batches
