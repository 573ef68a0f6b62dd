"""One executor per plan: a run holds the plan's lease while it may touch the cluster.

Everything a second ``balancer execute`` of the same plan would do while the first runs is harmful: its
clean-up removes the throttles of the batch in flight (the copy then runs unthrottled) and records that
batch interrupted, and both runs then go on with the same batches. So a run claims the plan first, by a
plan-level ``plan_executions`` row (batch -1, outcome ``running``) naming its host and process, renews it
while it runs, and releases it (outcome ``released``) when it ends, however it ends.

Rules (``holder``):
- A run holds the plan while its latest plan-level row is ``running`` and no older than the lease.
- A holder on this host whose process is gone holds nothing (a SIGKILLed run is taken over at once); one
  on another host is taken over only when its lease runs out, as its process cannot be seen from here.
- Two runs claiming at once both write their row, then both read: the run whose claim is older (then the
  smaller run id) keeps the plan, the other releases and refuses. Claims are ordered by the clocks of the
  hosts that wrote them; the cluster-side guard (a reassignment the plan did not start is refused) stays.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .records import PLAN_LEVEL, ExecutionRecord, Outcome


@dataclass(frozen=True)
class Claim:
    """Who a ``running`` row says holds the plan."""

    run_id: str
    host: str
    pid: int
    since: datetime  # the run's first claim
    seen: datetime  # its latest renewal

    @property
    def text(self) -> str:
        return Claim.detail(self.host, self.pid)

    @staticmethod
    def detail(host: str, pid: int) -> str:
        return f"pid {pid} on host {host}"

    @staticmethod
    def parse(detail: str | None) -> tuple[str, int] | None:
        words = (detail or "").split()
        if len(words) == 5 and words[0] == "pid" and words[2:4] == ["on", "host"] and words[1].isdigit():
            return words[4], int(words[1])
        return None


def this_process() -> tuple[str, int]:
    return socket.gethostname(), os.getpid()


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (signal 0 checks without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def claims(history: Sequence[ExecutionRecord]) -> dict[str, Claim]:
    """Per run, its claim as its plan-level rows leave it (a run whose latest such row is ``released`` has
    none)."""
    rows = sorted(
        (r for r in history if r.batch == PLAN_LEVEL and r.outcome in (Outcome.RUNNING, Outcome.RELEASED)),
        key=lambda r: r.recorded_at,
    )
    out: dict[str, Claim] = {}
    for row in rows:
        if row.outcome is Outcome.RELEASED:
            out.pop(row.run_id, None)
            continue
        who = Claim.parse(row.detail)
        if who is None:
            continue
        first = out.get(row.run_id)
        since = first.since if first else row.recorded_at
        out[row.run_id] = Claim(row.run_id, who[0], who[1], since, row.recorded_at)
    return out


def holder(
    history: Sequence[ExecutionRecord],
    *,
    now: datetime,
    lease_seconds: float,
    me: str | None = None,
    host: str | None = None,
    alive: Callable[[int], bool] = process_alive,
) -> Claim | None:
    """The run other than ``me`` that holds the plan (see the module's rules), the oldest claim first;
    None when the plan is free (or ``me`` holds it first)."""
    host = host if host is not None else this_process()[0]
    live = [
        c
        for c in claims(history).values()
        if (now - c.seen).total_seconds() <= lease_seconds and (c.host != host or alive(c.pid))
    ]
    live.sort(key=lambda c: (c.since, c.run_id))
    if not live or live[0].run_id == me:
        return None
    return live[0]
