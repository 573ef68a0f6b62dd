"""Actions: the public, validated value objects of a plan, and the cheap internal move tuples.

The search proposes ``Move`` tuples (index based, no validation: it tries many); the final
plan coalesces them per partition into ``Action`` objects, which validate themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from balancer.vocabulary import ActionKind

KINDS = tuple(ActionKind)


class Move(NamedTuple):
    """A candidate step on the model: ``p``'s replica (or leadership) goes ``src`` -> ``dst``.

    For a swap, partition ``q``'s replica goes the other way, ``dst`` -> ``src``.
    Broker fields are model indices, not broker ids.
    """

    kind: ActionKind
    p: int
    src: int
    dst: int
    q: int = -1


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    topic: str
    partition: int
    old_replicas: tuple[int, ...]
    new_replicas: tuple[int, ...]
    old_leader: int
    new_leader: int
    bytes_to_move: int

    def __post_init__(self) -> None:  # noqa: C901 - one check per field
        if self.kind not in KINDS:
            raise ValueError(f"{self._where}: kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.topic, str) or not self.topic:
            raise ValueError(f"{self._where}: topic must be a non-empty string")
        if isinstance(self.partition, bool) or not isinstance(self.partition, int) or self.partition < 0:
            raise ValueError(f"{self._where}: partition must be an int >= 0")
        for name in ("old_replicas", "new_replicas"):
            value = getattr(self, name)
            if (
                not isinstance(value, tuple)
                or not value
                or not all(isinstance(b, int) and not isinstance(b, bool) for b in value)
            ):
                raise ValueError(
                    f"{self._where}: {name} must be a non-empty tuple of int broker ids, got {value!r}"
                )
            if len(set(value)) != len(value):
                raise ValueError(f"{self._where}: {name} has a duplicate broker: {value!r}")
        if len(self.old_replicas) != len(self.new_replicas):
            raise ValueError(
                f"{self._where}: replication factor changed {self.old_replicas} -> {self.new_replicas}"
            )
        if self.old_leader not in self.old_replicas:
            raise ValueError(
                f"{self._where}: old_leader {self.old_leader} not in old_replicas {self.old_replicas}"
            )
        if self.new_leader not in self.new_replicas:
            raise ValueError(
                f"{self._where}: new_leader {self.new_leader} not in new_replicas {self.new_replicas}"
            )
        if self.new_replicas[0] != self.new_leader:
            raise ValueError(
                f"{self._where}: new_replicas[0] must be the intended leader {self.new_leader}, "
                f"got {self.new_replicas}"
            )
        if (
            isinstance(self.bytes_to_move, bool)
            or not isinstance(self.bytes_to_move, int)
            or self.bytes_to_move < 0
        ):
            raise ValueError(f"{self._where}: bytes_to_move must be an int >= 0, got {self.bytes_to_move!r}")
        same_set = set(self.old_replicas) == set(self.new_replicas)
        if self.kind == ActionKind.LEADERSHIP:
            if not same_set:
                raise ValueError(
                    f"{self._where}: a leadership transfer keeps the replica set, "
                    f"got {self.old_replicas} -> {self.new_replicas}"
                )
            if self.old_leader == self.new_leader:
                raise ValueError(f"{self._where}: a leadership transfer changes the leader")
            if self.bytes_to_move:
                raise ValueError(f"{self._where}: a leadership transfer moves no data")
        elif same_set:
            raise ValueError(
                f"{self._where}: a {self.kind} changes the replica set, "
                f"got {self.old_replicas} -> {self.new_replicas}"
            )

    @property
    def _where(self) -> str:
        """The action named in an error message (worked out only when one is raised: a plan may
        hold a million actions)."""
        return f"Action({self.topic!r}, {self.partition!r})"

    @property
    def moved_replicas(self) -> int:
        return len(set(self.new_replicas) - set(self.old_replicas))

    def row(self, seq: int) -> dict[str, object]:
        """The action as a ``plan_actions`` row's own columns (without plan_id and cluster), ``seq``-th of
        its plan: plain Python values, lists for the replica sets."""
        return {
            "seq": seq,
            "action": str(self.kind),
            "topic": self.topic,
            "partition": self.partition,
            "old_replicas": list(self.old_replicas),
            "new_replicas": list(self.new_replicas),
            "old_leader": self.old_leader,
            "new_leader": self.new_leader,
            "bytes_to_move": int(self.bytes_to_move),
        }
