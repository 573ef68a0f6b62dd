"""A closed window's consumer figures, from the reads of ``consumer_assignments`` and the window's partition
byte rates (``partition_load``): per partition the lag and consumption rate (``consumer_lag``), per member
the bytes per second it must consume, ranked beside its lag and partition count (``consumer_ranking``), per
group the skew, churn and lag growth (``consumer_groups``), and advice for the flagged ones
(``consumer_advice``, see ``balancer.consumers.advice``).

Rules:

- A member must consume what its partitions receive: the partition's ``bytes_in`` in the window. A partition
  without a rate in ``partition_load`` adds nothing to a member's figure and is counted in its
  ``unrated_partitions``: silence is not read as zero traffic, it is shown.
- Offsets are compared between the window's first and last reads of the group, the first being the newest
  read before the window when there is one (so consecutive windows share their boundary read and a window
  with one read of its own still has a rate). Lag is end offset − committed offset at the last read; its
  bytes are estimated with the partition's mean record size in the window (``bytes_in / messages_in``).
- The group's fair share is its bytes per second over its members; its traffic skew is the busiest
  member's bytes over that share. Skew above ``balance_threshold`` flags the group.
- A membership change is a read whose member identities differ from the previous read's: a classic group's
  generation moves with each (the Admin API shows no generation). A static member (``group.instance.id``)
  is the same identity across restarts; a dynamic one gets a new member id, and when its client id and
  host were seen before under another id, that is a rejoin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from balancer.consumers import advice as advising

RATE_COLUMNS = ("topic", "partition", "bytes_in", "messages_in")


@dataclass(frozen=True)
class Settings:
    """The ``consumers`` config values the figures and advice use (validated there)."""

    balance_threshold: float = 1.5
    storm_windows: int = 3
    storm_min_windows: int = 2
    min_lag_growth: int = 1000


@dataclass(frozen=True)
class WindowFigures:
    lag: list[dict]
    ranking: list[dict]
    groups: list[dict]
    advice: list[dict]


def _num(value) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _int(value) -> int | None:
    number = _num(value)
    return None if number is None else int(number)


def _str(value) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def window_figures(
    polls: pd.DataFrame,
    rates: pd.DataFrame,
    *,
    cluster: str,
    window_start: datetime,
    window_end: datetime,
    history: pd.DataFrame | None = None,
    settings: Settings = Settings(),
) -> WindowFigures:
    """The window [``window_start``, ``window_end``) of ``cluster``.

    ``polls``: ``consumer_assignments`` rows of the cluster read before ``window_end`` (older ones are
    ignored but the newest before ``window_start``, the baseline). ``rates``: the window's
    ``partition_load`` rows (``RATE_COLUMNS``). ``history``: earlier windows' ``consumer_groups`` rows of
    the cluster (for the rebalance storm)."""
    lag: list[dict] = []
    ranking: list[dict] = []
    groups: list[dict] = []
    found: list[dict] = []
    if polls.empty:
        return WindowFigures(lag, ranking, groups, found)
    polls = polls[(polls["cluster"] == cluster) & (polls["observed_at"] < window_end)]
    rate_of = {
        (str(t), int(p)): (_num(b), _num(m))
        for t, p, b, m in rates[list(RATE_COLUMNS)].itertuples(index=False, name=None)
    }
    window = {"cluster": cluster, "window_start": window_start, "window_end": window_end}
    for group_id, group in polls.groupby("group_id", sort=True):
        inside = group[group["observed_at"] >= window_start]
        if inside.empty:
            continue
        before = group[group["observed_at"] < window_start]
        times = sorted(inside["observed_at"].unique())
        if not before.empty:
            times = [before["observed_at"].max(), *times]
        reads = [group[group["observed_at"] == t] for t in times]
        figures = _group_figures(str(group_id), reads, times, rate_of, window)
        past = _past(history, str(group_id), window_end, settings.storm_windows - 1)
        figures.group.update(_churn(reads))
        kinds = advising.advise(figures, past, settings)
        figures.group["is_skewed"] = bool(
            figures.group["traffic_skew"] is not None
            and figures.group["traffic_skew"] > settings.balance_threshold
        )
        figures.group["flagged"] = figures.group["is_skewed"] or bool(kinds)
        figures.group["advice"] = sorted({str(a["kind"]) for a in kinds})
        for member in figures.members:
            share = member["traffic_share"]
            member["is_hot"] = bool(share is not None and share > settings.balance_threshold)
        lag.extend(figures.partitions)
        ranking.extend(figures.members)
        groups.append(figures.group)
        found.extend({**window, "group_id": str(group_id), **a} for a in kinds)
    return WindowFigures(lag, ranking, groups, found)


@dataclass
class GroupFigures:
    group: dict
    members: list[dict]  # consumer_ranking rows, in rank_by_traffic order
    partitions: list[dict]  # consumer_lag rows


def _group_figures(
    group_id: str, reads: list[pd.DataFrame], times: list, rate_of: dict, window: dict
) -> GroupFigures:
    first, last = reads[0], reads[-1]
    seconds = (pd.Timestamp(times[-1]) - pd.Timestamp(times[0])).total_seconds()
    held = last[last["topic"].notna()]
    offsets_then = {
        (str(t), int(p)): (_int(c), _int(e), _int(lg))
        for t, p, c, e, lg in first[first["topic"].notna()][
            ["topic", "partition", "committed_offset", "end_offset", "lag"]
        ].itertuples(index=False, name=None)
    }

    def per_second(now: int | None, then: int | None) -> float | None:
        if now is None or then is None or seconds <= 0:
            return None
        return max(0, now - then) / seconds

    partitions: list[dict] = []
    for row in held.itertuples(index=False):
        tp = (str(row.topic), int(row.partition))
        bytes_in, messages_in = rate_of.get(tp, (None, None))
        record_bytes = bytes_in / messages_in if bytes_in is not None and messages_in else None
        committed, end, lag = _int(row.committed_offset), _int(row.end_offset), _int(row.lag)
        committed_then, end_then, lag_then = offsets_then.get(tp, (None, None, None))
        consumed = per_second(committed, committed_then)
        partitions.append(
            {
                **window,
                "group_id": group_id,
                "member_id": _str(row.member_id),
                "client_id": _str(row.client_id),
                "topic": tp[0],
                "partition": tp[1],
                "committed_offset": committed,
                "end_offset": end,
                "lag_records": lag,
                "lag_bytes": None if lag is None or record_bytes is None else lag * record_bytes,
                "lag_growth": None if lag is None or lag_then is None else lag - lag_then,
                "consumed_records_per_sec": consumed,
                "consumed_bytes_per_sec": None
                if consumed is None or record_bytes is None
                else consumed * record_bytes,
                "produced_records_per_sec": per_second(end, end_then),
                "bytes_per_sec": bytes_in,
            }
        )

    members_now = last[last["member_id"].notna()].drop_duplicates("member_id")
    members: list[dict] = []
    for m in members_now.itertuples(index=False):
        own = [p for p in partitions if p["member_id"] == m.member_id]
        rated = [p["bytes_per_sec"] for p in own if p["bytes_per_sec"] is not None]
        own_lag_bytes = [p["lag_bytes"] for p in own if p["lag_bytes"] is not None]
        own_consumed = [p["consumed_bytes_per_sec"] for p in own if p["consumed_bytes_per_sec"] is not None]
        members.append(
            {
                **window,
                "group_id": group_id,
                "member_id": str(m.member_id),
                "client_id": _str(m.client_id),
                "host": _str(m.host),
                "group_instance_id": _str(m.group_instance_id),
                "partitions": len(own),
                "topics": len({p["topic"] for p in own}),
                "unrated_partitions": len(own) - len(rated),
                "bytes_per_sec": float(sum(rated)),
                "lag_records": int(sum(p["lag_records"] or 0 for p in own)),
                "lag_bytes": float(sum(own_lag_bytes)) if own_lag_bytes else None,
                "lag_growth": int(sum(p["lag_growth"] or 0 for p in own)),
                "consumed_bytes_per_sec": float(sum(own_consumed)) if own_consumed else None,
            }
        )
    total = sum(m["bytes_per_sec"] for m in members)
    fair = total / len(members) if members else None
    for m in members:
        m["traffic_share"] = m["bytes_per_sec"] / fair if fair else None
    _rank(members, "rank_by_partitions", lambda m: (-m["partitions"],))
    _rank(members, "rank_by_lag", lambda m: (-(m["lag_bytes"] or 0.0), -m["lag_records"]))
    _rank(members, "rank_by_traffic", lambda m: (-m["bytes_per_sec"],))
    members.sort(key=lambda m: m["rank_by_traffic"])

    assigned = len(partitions)
    count_fair = assigned / len(members) if members else None
    known = [p for p in partitions if p["lag_records"] is not None]
    known_then = [p for p in known if p["lag_growth"] is not None]
    lag_bytes = [p["lag_bytes"] for p in partitions if p["lag_bytes"] is not None]
    committed_only = {
        (str(t), int(p))
        for t, p in first[first["topic"].notna()][["topic", "partition"]].itertuples(index=False)
    } | {
        (str(t), int(p))
        for t, p in last[last["topic"].notna() & last["member_id"].isna()][["topic", "partition"]].itertuples(
            index=False
        )
    }
    state = last.iloc[0]
    group = {
        **window,
        "group_id": group_id,
        "group_protocol": _str(state["group_protocol"]),
        "assignor": _str(state["assignor"]),
        "group_state": _str(state["group_state"]),
        "reads": len(reads),
        "members": len(members),
        "idle_members": sum(1 for m in members if m["partitions"] == 0),
        "static_members": sum(1 for m in members if m["group_instance_id"] is not None),
        "partitions": assigned,
        "known_partitions": len({(p["topic"], p["partition"]) for p in partitions} | committed_only),
        "topics": len({p["topic"] for p in partitions}),
        "bytes_per_sec": float(total),
        "fair_share": fair,
        "traffic_skew": (max(m["bytes_per_sec"] for m in members) / fair) if fair else None,
        "partition_skew": (max(m["partitions"] for m in members) / count_fair) if count_fair else None,
        "lag_records": int(sum(p["lag_records"] for p in known)) if known else None,
        "lag_bytes": float(sum(lag_bytes)) if lag_bytes else None,
        "lag_growth": int(sum(p["lag_growth"] for p in known_then)) if known_then else None,
    }
    return GroupFigures(group=group, members=members, partitions=partitions)


def _rank(members: list[dict], column: str, key) -> None:
    # Ties broken by client id, then member id: the same input ranks the same way in every run.
    ordered = sorted(members, key=lambda m: (*key(m), m["client_id"] or "", m["member_id"]))
    for rank, member in enumerate(ordered, start=1):
        member[column] = rank


def _identities(read: pd.DataFrame) -> dict[str, tuple[str, str, str]]:
    """Member identity → (member id, client id, host) in one read (see ``Member.identity``)."""
    found = {}
    for m in read[read["member_id"].notna()].drop_duplicates("member_id").itertuples(index=False):
        instance = _str(m.group_instance_id)
        key = f"static:{instance}" if instance else f"member:{m.member_id}"
        found[key] = (str(m.member_id), _str(m.client_id) or "", _str(m.host) or "")
    return found


def _churn(reads: list[pd.DataFrame]) -> dict:
    """``membership_changes`` between consecutive reads, and ``rejoins``: dynamic members appearing under a
    new id with a client id and host seen earlier under another (``rejoined_client``: the latest one)."""
    changes = rejoins = 0
    rejoined: str | None = None
    seen: dict[tuple[str, str], set[str]] = {}  # (client id, host) -> member ids
    previous: dict[str, tuple[str, str, str]] | None = None
    for read in reads:
        now = _identities(read)
        if previous is not None and set(now) != set(previous):
            changes += 1
            for key in set(now) - set(previous):
                member_id, client_id, host = now[key]
                if key.startswith("member:") and seen.get((client_id, host), set()) - {member_id}:
                    rejoins += 1
                    rejoined = client_id
        for member_id, client_id, host in now.values():
            seen.setdefault((client_id, host), set()).add(member_id)
        previous = now
    return {"membership_changes": changes, "rejoins": rejoins, "rejoined_client": rejoined}


def _past(history: pd.DataFrame | None, group_id: str, window_end: datetime, count: int) -> list[dict]:
    """The group's ``count`` newest windows before ``window_end``, oldest first."""
    if history is None or history.empty or count <= 0:
        return []
    own = history[(history["group_id"] == group_id) & (history["window_end"] < window_end)]
    own = own.sort_values("window_end").drop_duplicates("window_end", keep="last").tail(count)
    return own.to_dict("records")
