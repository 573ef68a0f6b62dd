"""Advice for a consumer group, naming the cause found: recorded in ``consumer_advice``, never executed.

Assignment causes, checked when the group's traffic skew is over ``balance_threshold`` (each that holds is
advised; ``uneven_assignment`` only when none of the others explains the skew):

- ``idle_members``: more members than partitions, so some members can never get one;
- ``hot_partition``: the group's busiest partition alone carries more than the fair share (bytes/s over
  members), so no assignment can even the group out;
- ``range_multi_topic``: the range assignor, which places each topic on its own, gives the first members
  one extra partition of every topic whose partition count does not divide by the member count; across
  several topics those extras pile up on the same members;
- ``uneven_assignment``: none of those: the assignor balanced partition counts, not bytes, or a sticky
  assignment kept an old imbalance.

Causes checked whatever the skew:

- ``rebalance_storm``: the membership changed in at least ``storm_min_windows`` of the group's last
  ``storm_windows`` windows (this one included, and changed in this one), with members rejoining under new
  ids: restarts of members without static membership, each a rebalance;
- ``lag_growing_idle``: the group's lag grew by at least ``min_lag_growth`` records over the window while
  some members had nothing to consume (no partition, or partitions with no lag and no new records).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from balancer.consumers.model import AdviceKind
from balancer.execution.advice import ORDERING_CAVEAT

if TYPE_CHECKING:
    from balancer.consumers.windows import GroupFigures, Settings

RECOMMENDATIONS: dict[AdviceKind, str] = {
    AdviceKind.IDLE_MEMBERS: (
        "a partition is consumed by one member of a group at a time: run at most as many members as the "
        "subscription has partitions, or add partitions to its topics"
    ),
    AdviceKind.HOT_PARTITION: (
        "no assignment can split one partition: add partitions to the topic (or spread a hot key over "
        f"several). {ORDERING_CAVEAT}"
    ),
    AdviceKind.RANGE_MULTI_TOPIC: (
        "the range assignor places each topic separately and gives the same members the extra partitions of "
        "every topic: set partition.assignment.strategy=cooperative-sticky (incremental, no stop-the-world "
        "rebalance), or move the group to the broker-side protocol (group.protocol=consumer, Kafka 4)"
    ),
    AdviceKind.UNEVEN_ASSIGNMENT: (
        "the assignor balances partition counts, not bytes, and a sticky assignment keeps an old imbalance: "
        "size partitions evenly (or the member count to divide the partitions), or restart the busiest "
        "member so the group reassigns"
    ),
    AdviceKind.REBALANCE_STORM: (
        "members rejoin under new ids, each time a rebalance: give each consumer a stable group.instance.id "
        "(static membership: a restart within session.timeout.ms keeps its partitions without a "
        "rebalance), raise session.timeout.ms above a restart's duration, and use cooperative-sticky or the "
        "broker-side protocol so a rebalance stops only the partitions that move"
    ),
    AdviceKind.LAG_GROWING_IDLE: (
        "lag grows on some members while others have nothing to consume: the assignment does not follow the "
        "load; rebalance the group (cooperative-sticky or the broker-side protocol reassigns incrementally) "
        "or add partitions so the idle members can take some"
    ),
}


def _advice(kind: AdviceKind, member: dict | None, detail: str, figure: float | None, tp=None) -> dict:
    return {
        "kind": str(kind),
        "member_id": None if member is None else member["member_id"],
        "client_id": None if member is None else member["client_id"],
        "host": None if member is None else member["host"],
        "topic": None if tp is None else tp[0],
        "partition": None if tp is None else tp[1],
        "figure": figure,
        "detail": detail,
        "recommendation": RECOMMENDATIONS[kind],
    }


def _name(member: dict) -> str:
    return f"{member['client_id']} ({member['member_id']} on {member['host']})"


def advise(figures: GroupFigures, past: list[dict], settings: Settings) -> list[dict]:
    """The advice rows (without window and group) for one group's window figures; ``past`` holds its
    earlier windows' ``consumer_groups`` rows, oldest first."""
    group, members, partitions = figures.group, figures.members, figures.partitions
    found: list[dict] = []
    skew = group["traffic_skew"]
    if members and skew is not None and skew > settings.balance_threshold:
        hot = members[0]  # rank_by_traffic 1
        fair = group["fair_share"]
        if group["members"] > group["known_partitions"] and group["idle_members"]:
            idle_member = next(m for m in members if m["partitions"] == 0)
            found.append(
                _advice(
                    AdviceKind.IDLE_MEMBERS,
                    idle_member,
                    f"{group['members']} members for {group['known_partitions']} partitions: "
                    f"{group['idle_members']} idle, e.g. {_name(idle_member)}",
                    float(group["members"] - group["known_partitions"]),
                )
            )
        rated = [p for p in partitions if p["bytes_per_sec"] is not None]
        if rated:
            top = max(rated, key=lambda p: (p["bytes_per_sec"], p["topic"], -p["partition"]))
            if top["bytes_per_sec"] > fair:
                owner = next(m for m in members if m["member_id"] == top["member_id"])
                found.append(
                    _advice(
                        AdviceKind.HOT_PARTITION,
                        owner,
                        f"{top['topic']}-{top['partition']} carries {top['bytes_per_sec']:.0f} B/s, "
                        f"{top['bytes_per_sec'] / fair:.2f}x the group's fair share of {fair:.0f} B/s; "
                        f"consumed by {_name(owner)}",
                        top["bytes_per_sec"] / fair,
                        (top["topic"], top["partition"]),
                    )
                )
        most = min(members, key=lambda m: m["rank_by_partitions"])
        even = math.ceil(group["partitions"] / group["members"])
        if (
            (group["assignor"] or "").lower() == "range"
            and group["topics"] >= 2
            and most["partitions"] > even
        ):
            found.append(
                _advice(
                    AdviceKind.RANGE_MULTI_TOPIC,
                    most,
                    f"range over {group['topics']} topics gives {_name(most)} {most['partitions']} of "
                    f"{group['partitions']} partitions (an even split: {even} at most)",
                    float(most["partitions"] / (group["partitions"] / group["members"])),
                )
            )
        if not found:
            found.append(
                _advice(
                    AdviceKind.UNEVEN_ASSIGNMENT,
                    hot,
                    f"{_name(hot)} must consume {hot['bytes_per_sec']:.0f} B/s, {skew:.2f}x the fair share "
                    f"of {fair:.0f} B/s, with {hot['partitions']} of {group['partitions']} partitions",
                    skew,
                )
            )

    recent = [*past[-(settings.storm_windows - 1) :], group] if settings.storm_windows > 1 else [group]
    changed = sum(1 for g in recent if (g.get("membership_changes") or 0) > 0)
    rejoins = sum(int(g.get("rejoins") or 0) for g in recent)
    if group["membership_changes"] > 0 and changed >= settings.storm_min_windows and rejoins > 0:
        client = group["rejoined_client"] or next(
            (g.get("rejoined_client") for g in reversed(recent) if g.get("rejoined_client")), None
        )
        named = next((m for m in members if m["client_id"] == client), None)
        storm = _advice(
            AdviceKind.REBALANCE_STORM,
            named,
            f"membership changed in {changed} of the last {len(recent)} windows "
            f"({group['membership_changes']} changes in this one); {rejoins} rejoins under new ids, "
            f"latest by client {client}; {group['static_members']} of {group['members']} members static",
            float(changed),
        )
        # A member caught between leaving and rejoining is not in the last read: its client id still names it.
        storm["client_id"] = client
        found.append(storm)

    growth = group["lag_growth"]
    idle = [
        m
        for m in members
        if m["partitions"] == 0
        or all(
            (p["lag_records"] or 0) == 0 and not p["produced_records_per_sec"]
            for p in partitions
            if p["member_id"] == m["member_id"]
        )
    ]
    if growth is not None and growth >= max(1, settings.min_lag_growth) and idle and len(idle) < len(members):
        lagging = max(
            (m for m in members if m not in idle),
            key=lambda m: (m["lag_growth"], m["lag_records"], m["member_id"]),
        )
        found.append(
            _advice(
                AdviceKind.LAG_GROWING_IDLE,
                lagging,
                f"lag grew by {growth} records in the window, {lagging['lag_growth']} of them on "
                f"{_name(lagging)}, while {len(idle)} member(s) had nothing to consume, "
                f"e.g. {_name(idle[0])}",
                float(growth),
            )
        )
    return found
