"""Planner options: a frozen, validated value object (messages name the argument)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from balancer.vocabulary import RESOURCES, SOFT_GOALS

if TYPE_CHECKING:  # the planner reads no config at run time: the caller hands the parsed section over
    from balancer.config import BalancerConfig, ThresholdsConfig

# Resource -> the soft goal that balances it.
RESOURCE_GOALS = {
    "network_in": "network_in_distribution",
    "network_out": "network_out_distribution",
    "disk": "disk_distribution",
    "replicas": "replicas_distribution",
    "leaders": "leaders_distribution",
}
# Disk below 20% full on average is not evened out: a broker at 1.5x such an average is still at
# 30%, far under the capacity goal's ceiling (which always holds), and every byte moved to even
# it out costs replication bandwidth and buys nothing an operator needs. (Cruise Control's default
# is 0.0, i.e. always balance.) Traffic keeps 0.0: hot brokers cost latency at any utilization.
LOW_UTILIZATION_DEFAULTS = {
    "network_in": 0.0,
    "network_out": 0.0,
    "disk": 0.2,
    "replicas": 0.0,
    "leaders": 0.0,
}
# Counts have no capacity, so no utilization to be low: only 0.0 is meaningful for them.
_MEASURED = RESOURCES


class _FrozenMap(dict[str, Any]):
    """A read-only dict (options are immutable values) that still pickles."""

    def _readonly(self, *args: object, **kwargs: object) -> None:
        raise TypeError("PlannerOptions mappings are read-only")

    # Every mutator refuses; typeshed gives each its own signature, which one function cannot match.
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[_FrozenMap], tuple[dict[str, Any]]]:
        return (type(self), (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


@dataclass(frozen=True, kw_only=True)
class PlannerOptions:
    balance_threshold: float = 1.10  # max utilization / cluster utilization allowed per resource
    disk_balance_threshold: float | None = (
        None  # disk's own (Cruise Control's disk.balance.threshold); None: the same
    )
    capacity_threshold: float = 0.8  # hard ceiling on any broker's utilization
    max_bytes_to_move: int | None = None  # cap on data copied by the whole plan
    max_moves_per_broker: int | None = None  # cap on replica moves in or out of any one broker
    excluded_topics: str | None = None  # regex of topics never moved; whole-name match, like Java matches()
    excluded_brokers: tuple[int, ...] = field(default=())  # never receive replicas or leadership
    # Drained (decommissioned) brokers: every replica and leadership leaves them, and none comes back.
    drain_brokers: tuple[int, ...] = field(default=())
    # Per resource (RESOURCE_GOALS' keys): its own balance threshold; unset ones follow
    # balance_threshold (disk: disk_balance_threshold first).
    thresholds: Mapping[str, float] = field(default_factory=dict)
    # Per resource: below this cluster-wide utilization the resource is not balanced (Cruise
    # Control's *.low.utilization.threshold). Unset: LOW_UTILIZATION_DEFAULTS.
    low_utilization: Mapping[str, float] = field(default_factory=dict)
    # Soft goals to run, in priority order (names from SOFT_GOALS); None: all, in SOFT_GOALS' order.
    goals: tuple[str, ...] | None = None
    # Where the traffic goals put data first (the disk goal has nothing to do): how much more data
    # than the least each shed or fill may copy to make fewer replica moves, as a share (0.2: up
    # to 20% more bytes). 0.0: the least data, however many moves. None: search.constants.DATA_SLACK.
    # The disk goals' swaps too: an exchange copies at most that share more than the bytes its net
    # relief takes moved plainly (twice that off the broker that sets the figure).
    data_slack: float | None = None
    # Then run the goals again from the least-data placement within the first plan's broker levels
    # (planner.relaxation; clusters up to its MAX_VARIABLES), keeping the second plan where it
    # copies less data and leaves no goal worse. False: the goals' search alone.
    relax: bool = True
    # A traffic goal's swap (an exchange of replicas between a hot broker and a partner) copies at
    # most SWAP_DATA_CAP x the bytes its net relief takes moved plainly off that broker (at the
    # broker's own bytes per unit of the resource). False: any exchange; the one nearest the relief
    # wanted is made, whatever its size (two giants of one topic differ by a little traffic and
    # copy both). None: uncapped first, then capped as well where the first plan made a swap the cap
    # refuses and copies more than the data slack over the least its broker levels need; ``plan``
    # keeps the better (as ``relax``).
    swap_data_cap: bool | None = None
    # A traffic goal filling a broker where the disk goal has work takes its replicas in the goal's
    # cost order (few big moves; the disk excess of the brokers it fills from copies free). True: data
    # first wherever few big moves would copy more than the data slack over that order (the fill takes
    # no bytes off the hot disks on purpose, so they buy the disk goal nothing). False: the cost order
    # always. None: the cost order first, then data first as well where the first plan had a fill
    # that order would beat and copies more than the data slack over the least its broker levels
    # need; ``plan`` keeps the better (as ``relax``).
    fill_data_first: bool | None = None
    # A traffic goal filling a broker where the disk goal has work draws first on the brokers over
    # the disk goal's line, each up to its excess there (bytes that goal must move anyway). None:
    # the plain fill first, then this one as well where the first plan filled brokers while disks
    # stood over the line; ``plan`` keeps the better (as ``relax``).
    fill_disk_excess: bool | None = None
    # The replica count goal runs before the traffic and disk goals (Cruise Control's order), so
    # they keep its band: a new broker is filled with its share of replicas, not hundreds of small
    # ones that leave the count goal no move (each would take traffic the traffic goals then lack).
    # True: always; False: never (the goals in ``goals``' order). None: that order first, then this
    # one as well (and from the relaxation's placement within its levels) where the first plan
    # leaves the replica count goal outside its threshold; ``plan`` keeps the better (as ``relax``:
    # less data, no goal worse, moves paid for; or more data for a goal the other plan leaves unmet;
    # never one that leaves a traffic goal outside its threshold that the other meets). None by
    # default: True alone can leave a new broker under a traffic goal's floor that the goals' own
    # order fills, and False leaves most scale-outs' count goals unmet.
    counts_first: bool | None = None

    def __post_init__(self) -> None:  # noqa: C901 - one check per option
        def bad(name: str, why: str, value: Any) -> ValueError:
            return ValueError(f"PlannerOptions.{name} {why} (got {value!r})")

        bt = self.balance_threshold
        if isinstance(bt, bool) or not isinstance(bt, (int, float)) or not 1.0 < bt <= 10.0:
            raise bad("balance_threshold", "must be a number in (1.0, 10.0]", bt)
        dt = self.disk_balance_threshold
        if dt is not None and (
            isinstance(dt, bool) or not isinstance(dt, (int, float)) or not 1.0 < dt <= 10.0
        ):
            raise bad("disk_balance_threshold", "must be None or a number in (1.0, 10.0]", dt)
        ct = self.capacity_threshold
        if isinstance(ct, bool) or not isinstance(ct, (int, float)) or not 0.0 < ct <= 1.0:
            raise bad("capacity_threshold", "must be a number in (0.0, 1.0]", ct)
        ds = self.data_slack
        if ds is not None and (
            isinstance(ds, bool) or not isinstance(ds, (int, float)) or not 0.0 <= ds <= 1.0
        ):
            raise bad("data_slack", "must be None or a number in [0.0, 1.0]", ds)
        if not isinstance(self.relax, bool):
            raise bad("relax", "must be a bool", self.relax)
        if self.swap_data_cap is not None and not isinstance(self.swap_data_cap, bool):
            raise bad("swap_data_cap", "must be None or a bool", self.swap_data_cap)
        if self.fill_data_first is not None and not isinstance(self.fill_data_first, bool):
            raise bad("fill_data_first", "must be None or a bool", self.fill_data_first)
        if self.fill_disk_excess is not None and not isinstance(self.fill_disk_excess, bool):
            raise bad("fill_disk_excess", "must be None or a bool", self.fill_disk_excess)
        if self.counts_first is not None and not isinstance(self.counts_first, bool):
            raise bad("counts_first", "must be None or a bool", self.counts_first)
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
                raise bad(
                    "excluded_topics", f"is not a valid regular expression: {exc}", self.excluded_topics
                ) from None
        for name in ("excluded_brokers", "drain_brokers"):
            brokers = getattr(self, name)
            if brokers is None or isinstance(brokers, (str, bytes)) or not hasattr(brokers, "__iter__"):
                raise bad(name, "must be a sequence of broker ids", brokers)
            brokers = tuple(brokers)
            if any(isinstance(b, bool) or not isinstance(b, int) for b in brokers):
                raise bad(name, "must hold only int broker ids", brokers)
            object.__setattr__(self, name, tuple(sorted(set(brokers))))
        for name, lo, hi, what in (
            ("thresholds", 1.0, 10.0, "a number in (1.0, 10.0]"),
            ("low_utilization", 0.0, 1.0, "a number in [0.0, 1.0]"),
        ):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise bad(name, "must be a mapping of resource name to number", value)
            clean = {}
            for key, v in value.items():
                if key not in RESOURCE_GOALS:
                    raise bad(
                        f"{name}[{key!r}]", f"is not a resource; allowed: {', '.join(RESOURCE_GOALS)}", v
                    )
                ok = (
                    not isinstance(v, bool)
                    and isinstance(v, (int, float))
                    and (lo < v <= hi if name == "thresholds" else lo <= v <= hi)
                )
                if not ok:
                    raise bad(f"{name}[{key!r}]", f"must be {what}", v)
                if name == "low_utilization" and key not in _MEASURED and v != 0:
                    raise bad(f"{name}[{key!r}]", "must be 0.0: counts have no capacity to be utilized", v)
                clean[key] = float(v)
            object.__setattr__(self, name, _FrozenMap(clean))
        if self.goals is not None:
            goals = self.goals
            if isinstance(goals, (str, bytes)) or not hasattr(goals, "__iter__"):
                raise bad("goals", "must be a sequence of soft goal names or None", goals)
            goals = tuple(goals)
            unknown = [g for g in goals if g not in SOFT_GOALS]
            if unknown or len(set(goals)) != len(goals):
                raise bad("goals", f"must name distinct soft goals from {', '.join(SOFT_GOALS)}", goals)
            object.__setattr__(self, "goals", goals)
        object.__setattr__(self, "balance_threshold", float(bt))
        object.__setattr__(self, "capacity_threshold", float(ct))
        if dt is not None:
            object.__setattr__(self, "disk_balance_threshold", float(dt))
        if ds is not None:
            object.__setattr__(self, "data_slack", float(ds))

    @property
    def disk_threshold(self) -> float:
        return self.threshold("disk")

    def threshold(self, resource: str) -> float:
        """The balance threshold of ``resource`` (a RESOURCE_GOALS key)."""
        if resource in self.thresholds:
            return self.thresholds[resource]
        if resource == "disk" and self.disk_balance_threshold is not None:
            return self.disk_balance_threshold
        return self.balance_threshold

    def low_utilization_of(self, resource: str) -> float:
        return self.low_utilization.get(resource, LOW_UTILIZATION_DEFAULTS[resource])

    @classmethod
    def from_config(cls, balancer_config: BalancerConfig) -> PlannerOptions:
        """From the parsed ``balancer`` section of the YAML config."""
        return cls(
            balance_threshold=balancer_config.balance_threshold,
            capacity_threshold=balancer_config.capacity_threshold,
            max_bytes_to_move=balancer_config.max_bytes_to_move,
            max_moves_per_broker=balancer_config.max_moves_per_broker,
            data_slack=balancer_config.data_slack,
            relax=balancer_config.relax,
            swap_data_cap=balancer_config.swap_data_cap,
            fill_data_first=balancer_config.fill_data_first,
            fill_disk_excess=balancer_config.fill_disk_excess,
            counts_first=balancer_config.counts_first,
            excluded_topics=balancer_config.excluded_topics,
            excluded_brokers=tuple(balancer_config.excluded_brokers),
            drain_brokers=tuple(balancer_config.drain_brokers),
            **_thresholds_from(balancer_config.thresholds),
            goals=None if balancer_config.goals is None else tuple(balancer_config.goals),
        )

    def topic_excluded(self, topic: str) -> bool:
        return self.excluded_topics is not None and re.fullmatch(self.excluded_topics, topic) is not None


def _thresholds_from(section: ThresholdsConfig) -> dict[str, Any]:
    """``balancer.thresholds`` (config) as ``thresholds`` / ``low_utilization`` kwargs: only keys set."""
    balance, low = {}, {}
    for resource in RESOURCE_GOALS:
        entry = getattr(section, resource)
        if entry.balance is not None:
            balance[resource] = entry.balance
        if entry.low_utilization is not None:
            low[resource] = entry.low_utilization
    return {"thresholds": balance, "low_utilization": low}
