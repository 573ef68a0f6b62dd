"""Planner options: a frozen, validated value object (messages name the argument)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class PlannerOptions:
    balance_threshold: float = 1.10       # max utilization / cluster utilization allowed per resource
    disk_balance_threshold: float | None = None  # disk's own (Cruise Control's disk.balance.threshold); None: the same
    capacity_threshold: float = 0.8       # hard ceiling on any broker's utilization
    max_bytes_to_move: int | None = None  # cap on data copied by the whole plan
    max_moves_per_broker: int | None = None  # cap on replica moves in or out of any one broker
    excluded_topics: str | None = None    # regex of topics never moved; whole-name match, like Java matches()
    excluded_brokers: tuple[int, ...] = field(default=())  # never receive replicas or leadership
    # Drained (decommissioned) brokers: every replica and leadership leaves them, and none comes back.
    drain_brokers: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        def bad(name: str, why: str, value: Any) -> ValueError:
            return ValueError(f"PlannerOptions.{name} {why} (got {value!r})")

        bt = self.balance_threshold
        if isinstance(bt, bool) or not isinstance(bt, (int, float)) or not 1.0 < bt <= 10.0:
            raise bad("balance_threshold", "must be a number in (1.0, 10.0]", bt)
        dt = self.disk_balance_threshold
        if dt is not None and (isinstance(dt, bool) or not isinstance(dt, (int, float)) or not 1.0 < dt <= 10.0):
            raise bad("disk_balance_threshold", "must be None or a number in (1.0, 10.0]", dt)
        ct = self.capacity_threshold
        if isinstance(ct, bool) or not isinstance(ct, (int, float)) or not 0.0 < ct <= 1.0:
            raise bad("capacity_threshold", "must be a number in (0.0, 1.0]", ct)
        for name in ("max_bytes_to_move", "max_moves_per_broker"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise bad(name, "must be a positive int or None", value)
        if self.excluded_topics is not None:
            if not isinstance(self.excluded_topics, str):
                raise bad("excluded_topics", "must be a regex string or None", self.excluded_topics)
            try:
                re.compile(self.excluded_topics)
            except re.error as exc:
                raise bad("excluded_topics", f"is not a valid regular expression: {exc}", self.excluded_topics) from None
        for name in ("excluded_brokers", "drain_brokers"):
            brokers = getattr(self, name)
            if brokers is None or isinstance(brokers, (str, bytes)) or not hasattr(brokers, "__iter__"):
                raise bad(name, "must be a sequence of broker ids", brokers)
            brokers = tuple(brokers)
            if any(isinstance(b, bool) or not isinstance(b, int) for b in brokers):
                raise bad(name, "must hold only int broker ids", brokers)
            object.__setattr__(self, name, tuple(sorted(set(brokers))))
        object.__setattr__(self, "balance_threshold", float(bt))
        object.__setattr__(self, "capacity_threshold", float(ct))
        if dt is not None:
            object.__setattr__(self, "disk_balance_threshold", float(dt))

    @property
    def disk_threshold(self) -> float:
        return self.balance_threshold if self.disk_balance_threshold is None else self.disk_balance_threshold

    @classmethod
    def from_config(cls, balancer_config: Any) -> "PlannerOptions":
        """From ``balancer.config.BalancerConfig`` (or anything with the same attributes)."""
        return cls(
            balance_threshold=balancer_config.balance_threshold,
            capacity_threshold=balancer_config.capacity_threshold,
            max_bytes_to_move=balancer_config.max_bytes_to_move,
            max_moves_per_broker=balancer_config.max_moves_per_broker,
            excluded_topics=balancer_config.excluded_topics,
            excluded_brokers=tuple(balancer_config.excluded_brokers or ()),
            drain_brokers=tuple(getattr(balancer_config, "drain_brokers", None) or ()),
        )

    def topic_excluded(self, topic: str) -> bool:
        return self.excluded_topics is not None and re.fullmatch(self.excluded_topics, topic) is not None
