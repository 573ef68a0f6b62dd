"""Pruning: the moves a plan's end state does not need, undone.

The goals run in priority order and each keeps what the ones before it did; a replica an early
goal moved off a broker may have been made needless by the moves of a later goal (the broker got
relief elsewhere, the receiver got too much). Only the end state matters to the operator, who pays
for every byte and every move of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .actions import Move
from .goals.base import Goal
from .model import ClusterModel
from .search.constants import LEADERSHIP, REPLICA_MOVE

PRUNE_PASSES = 3  # a return frees room on the broker the replica leaves: the next pass may use it


def undo_needless(model: ClusterModel, goals: Sequence[Goal]) -> None:
    """Put back each replica the plan moved, the biggest first, where every goal accepts its return
    (each keeps both brokers within its limits, so no goal's figure gets worse and a replan finds no
    work); then each leadership, where its first leader still holds the partition."""
    for _ in range(PRUNE_PASSES):
        if not return_replicas(model, goals):
            break
    touched = np.fromiter(model.touched, dtype=np.int64, count=len(model.touched))
    led = touched[model.leader[touched] != model.orig_leader[touched]]
    for p in led.tolist():
        a = int(model.orig_leader[p])
        if model.holds(p, a):
            Goal.try_move(Move(LEADERSHIP, p, int(model.leader[p]), a), model, goals)


def return_replicas(model: ClusterModel, goals: Sequence[Goal]) -> bool:
    """One pass of returns over the partitions the plan moves, the biggest first. True if one returned."""
    touched = np.fromiter(model.touched, dtype=np.int64, count=len(model.touched))
    moved = touched[(model.replicas[touched] != model.orig_replicas[touched]).any(axis=1)]
    returned = False
    for p in moved[np.argsort(-model.size[moved], kind="stable")].tolist():
        old = set(model.orig_replicas[p].tolist()) - {-1}
        for c in sorted(set(model.replicas[p].tolist()) - old - {-1}):
            for a in sorted(old - set(model.replicas[p].tolist())):
                if Goal.try_move(Move(REPLICA_MOVE, p, c, a), model, goals):
                    returned = True
                    break
    return returned
