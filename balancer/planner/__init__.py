"""Traffic-aware partition planner: Cruise Control's goals, small and vectorized with numpy.

    from balancer.planner import plan, PlannerOptions
    result = plan(snapshot, PlannerOptions(balance_threshold=1.10))
    result.to_reassignment()   # kafka-reassign-partitions.sh --execute
    result.to_election()       # kafka-leader-election.sh --election-type preferred

Pure Python + numpy: no Spark, no I/O. Deterministic for equal input.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from balancer.vocabulary import RESOURCES, ActionKind

from .actions import Action, Move
from .goals import (
    BALANCE_MARGIN,
    BOUND_TOLERANCE,
    TARGET_OVER_BOUND,
    CapacityGoal,
    DiskCapacityGoal,
    DiskDistributionGoal,
    DistinctBrokersGoal,
    DistributionGoal,
    DrainGoal,
    Goal,
    GoalError,
    LeaderBytesInDistributionGoal,
    LeaderCountDistributionGoal,
    NetworkInCapacityGoal,
    NetworkInDistributionGoal,
    NetworkOutCapacityGoal,
    NetworkOutDistributionGoal,
    RackAwareGoal,
    ReplicaCountDistributionGoal,
    ReplicationFactorGoal,
    ResourceGoal,
    default_goals,
)
from .model import ClusterModel, SnapshotError, broker_loads
from .options import RESOURCE_GOALS, PlannerOptions
from .prune import undo_needless
from .relaxation import data_bound, fits, relax
from .result import UNMET_TOLERANCE, GoalReport, Plan, build_actions, figures, total_bytes
from .search.constants import DATA_SLACK

# The resource whose balance figure (Plan.after) a balance goal sets.
BALANCED_RESOURCE = {RESOURCE_GOALS[r]: r for r in RESOURCES}
MAX_SWEEPS = 3  # passes over all goals; the last one usually finds nothing
# Replicas up to which a plan may search again with the fills drawing on the disk excess
# (PlannerOptions.fill_disk_excess None): past it a second search and the data bound that decides
# whether to keep it cost more than the planning budget allows (a skewed 1.3M-replica cluster: about
# 13 s of CPU a search, against a budget of 30 s for the whole plan).
EXCESS_START_REPLICAS = 500_000

__all__ = [
    "Action",
    "CapacityGoal",
    "ClusterModel",
    "DiskCapacityGoal",
    "DiskDistributionGoal",
    "DistinctBrokersGoal",
    "DistributionGoal",
    "DrainGoal",
    "Goal",
    "GoalError",
    "GoalReport",
    "LeaderBytesInDistributionGoal",
    "LeaderCountDistributionGoal",
    "Move",
    "NetworkInCapacityGoal",
    "NetworkInDistributionGoal",
    "NetworkOutCapacityGoal",
    "NetworkOutDistributionGoal",
    "Plan",
    "PlannerOptions",
    "RackAwareGoal",
    "ReplicaCountDistributionGoal",
    "ReplicationFactorGoal",
    "ResourceGoal",
    "SnapshotError",
    "broker_loads",
    "default_goals",
    "plan",
]


def plan(  # noqa: C901 - one branch per start, each gated as the comment below says
    snapshot: Mapping[str, Any], options: PlannerOptions | None = None, *, goals: list[Goal] | None = None
) -> Plan:
    """Plan leadership transfers and replica moves that balance ``snapshot``.

    Raises :class:`SnapshotError` for a malformed snapshot. Hard goals that cannot be met
    (e.g. capacity with nowhere to go) are reported in ``Plan.unsatisfied``, not raised:
    a best-effort plan is still the most useful answer for a live cluster.
    """
    if options is None:
        options = PlannerOptions()
    elif not isinstance(options, PlannerOptions):
        raise TypeError(f"options must be PlannerOptions, got {type(options).__name__}")
    started = time.perf_counter()
    goals = _goals(options, goals)
    # Starts: the search, then the search from the relaxation's placement within the levels the
    # search left (``relax``; clusters within its MAX_VARIABLES); with ``swap_data_cap`` None, both
    # again with the traffic swaps capped where the first plan made a swap over the cap; then the
    # exact relaxation from the levels of the plan chosen so far; last, with ``fill_data_first`` None,
    # the search (and its relaxed start) with the fills data first where the first plan's fills would
    # have copied much less that way; the search drawing on the disk excess; the search with the
    # replica count goal first where the first plan leaves it unmet (``counts_first``). Only where
    # the first plan copies more than the data slack over
    # the least its broker levels need are the others tried (elsewhere they could save little). The
    # plan returned is chosen from all of them at once (``_choose``), so the order the starts run in
    # does not decide which is kept.
    uncapped = options.swap_data_cap is None
    first = dataclasses.replace(options, swap_data_cap=False) if uncapped else options
    searched, final = _search(snapshot, goals, first, started)
    assert searched is not None  # only a search from the relaxation's placement finds no plan
    fit = fits(final)
    relaxable = options.relax and fit
    capped = uncapped and final.wide_swaps > 0 and fit
    # A data-first plan is kept only where it copies the data slack less; the fills' saving, summed
    # broker by broker as each was made, is rough (the fills draw on one another's pools), so half
    # that share gates the search.
    filled = (
        options.fill_data_first is None
        and final.wide_fills >= 0.5 * _slack(options) * searched.bytes_to_move > 0
    )
    # The fills drawing on the disk excess could save about the bytes the first plan's fills took off
    # brokers within the disk line while others stood over it: tried where those are a quarter of
    # the data slack's share of the plan or more, on clusters up to EXCESS_START_REPLICAS.
    excess = (
        options.fill_disk_excess is None
        and final.disk_fills >= 0.25 * _slack(options) * searched.bytes_to_move > 0
        and int(final.rf.sum()) <= EXCESS_START_REPLICAS
    )
    # The replica count goal first, where the first plan leaves it outside its threshold: the fills
    # then keep its band, and a plan that fills new brokers with their share of replicas can copy
    # less than one filling them with many small ones, which leave that goal no move.
    counted = options.counts_first is None and _counts_unmet(searched, final)
    # Near the least data its levels need, the first plan leaves the others little to save; but not
    # where it leaves the count unmet: the count goal first reaches other levels.
    if (
        not searched.replica_moves
        or not (relaxable or capped or filled or excess or counted)
        or (not counted and _near_least(snapshot, searched, final.load, goals, options))
    ):
        return searched  # no other start to try, or none could be kept
    # Each other start's plan, with the options it ran with and the loads it left.
    found: list[tuple[Plan, PlannerOptions, np.ndarray]] = []

    def chosen() -> tuple[Plan, PlannerOptions, np.ndarray]:
        best = _choose(searched, [p for p, _, _ in found], options, goals)
        return next((f for f in found if f[0] is best), (searched, first, final.load))

    def keep(plan: Plan | None, model: ClusterModel, tried: PlannerOptions) -> None:
        if plan is not None:
            found.append((plan, tried, model.load))

    def relaxed_start(tried: PlannerOptions, levels: np.ndarray) -> None:
        if relaxable:
            beat = chosen()[0].bytes_to_move
            keep(*_search(snapshot, goals, tried, started, levels=levels, beat=beat), tried)

    def search_start(tried: PlannerOptions) -> None:
        searched, final = _search(snapshot, goals, tried, started)
        keep(searched, final, tried)
        if (
            relaxable
            and searched is not None
            and not _near_least(snapshot, searched, final.load, goals, options)
        ):
            relaxed_start(tried, final.load)

    relaxed_start(first, final.load)
    if capped:
        search_start(dataclasses.replace(first, swap_data_cap=True))
    if relaxable:
        best, tried, levels = chosen()
        keep(
            *_search(snapshot, goals, tried, started, levels=levels, beat=best.bytes_to_move, exact=True),
            tried,
        )
    if filled:
        search_start(dataclasses.replace(first, fill_data_first=True))
    if excess:
        search_start(dataclasses.replace(first, fill_disk_excess=True))
    if counted:
        # The count goal first, then (as for the first search) from the relaxation's placement
        # within the levels that search left, in the same order.
        tried = dataclasses.replace(first, counts_first=True)
        counts, model = _counts_search(snapshot, goals, tried, started)
        keep(counts, model, tried)
        if relaxable and counts is not None:
            beat = chosen()[0].bytes_to_move
            keep(*_counts_search(snapshot, goals, tried, started, levels=model.load, beat=beat), tried)
    return dataclasses.replace(chosen()[0], seconds=time.perf_counter() - started)


def _goals(options: PlannerOptions, goals: list[Goal] | None) -> list[Goal]:
    """The goals a plan runs: ``goals``, or the options' (``default_goals``); with ``counts_first``,
    the replica count goal first among the soft ones (``_counts_first``)."""
    goals = default_goals(options) if goals is None else goals
    return _counts_first(goals) if options.counts_first else goals


def _counts_unmet(searched: Plan, final: ClusterModel) -> bool:
    """``searched`` leaves the replica count goal outside its threshold, on a cluster up to
    EXCESS_START_REPLICAS (past it a second search does not fit the planning budget)."""
    count = ReplicaCountDistributionGoal.name
    unmet = any(r.goal == count and not r.within_threshold for r in searched.goals)
    return unmet and int(final.rf.sum()) <= EXCESS_START_REPLICAS


def _counts_search(
    snapshot: Mapping[str, Any],
    goals: list[Goal],
    tried: PlannerOptions,
    started: float,
    *,
    levels: np.ndarray | None = None,
    beat: int = 0,
) -> tuple[Plan | None, ClusterModel]:
    """The search with the replica count goal first (``_counts_first``; from the relaxation's
    placement within ``levels`` where given, as ``_search``), its plan's goal reports in ``goals``'
    order as every other plan's (``_better`` pairs them by position)."""
    found, final = _search(snapshot, _counts_first(goals), tried, started, levels=levels, beat=beat)
    if found is None:
        return None, final
    by_name = {r.goal: r for r in found.goals}
    return dataclasses.replace(found, goals=tuple(by_name[g.name] for g in goals)), final


def _counts_first(goals: list[Goal]) -> list[Goal]:
    """``goals`` with the replica count goal moved before the first soft goal (Cruise Control's
    order: its ReplicaDistributionGoal comes before the resource distribution goals)."""
    count = next((g for g in goals if isinstance(g, ReplicaCountDistributionGoal)), None)
    if count is None:
        return goals
    rest = [g for g in goals if g is not count]
    at = next((i for i, g in enumerate(rest) if not g.hard), len(rest))
    return [*rest[:at], count, *rest[at:]]


def _choose(searched: Plan, others: list[Plan], options: PlannerOptions, goals: list[Goal]) -> Plan:
    """The plan to return of ``searched`` (the first search's) and ``others`` (the other starts'),
    judged all against all, so that the order they come in decides nothing.

    A plan is a candidate where it is ``searched`` or better than it (``_better``): no goal worse
    than the first search leaves it, less data. Of the candidates, those no other candidate is better
    than remain; of those, the one copying most data. Of any two that remain, the one copying less
    leaves some goal worse than the other or adds more moves than its saving pays for: ``_better``
    would not take it in place of the other, so the one copying more is kept (goals before data, as
    in the search). Ties: fewer replica moves, fewer leader moves, then the actions and goal reports
    as text (equal plans from different starts)."""
    candidates = [searched, *(p for p in others if _better(p, searched, options, goals))]
    unbeaten = [p for p in candidates if not any(_better(o, p, options, goals) for o in candidates)]
    first = min(map(_order, unbeaten))
    tied = [p for p in unbeaten if _order(p) == first]
    return tied[0] if len(tied) == 1 else min(tied, key=lambda p: repr((p.actions, p.goals)))


def _order(plan: Plan) -> tuple[int, int, int]:
    """``_choose``'s order among plans no other is better than: most data first (see there); the
    text of a plan, a last resort, is written out only for plans tied on these."""
    return (-plan.bytes_to_move, plan.replica_moves, plan.leader_moves)


def _near_least(
    snapshot: Mapping[str, Any],
    searched: Plan,
    levels: np.ndarray,
    goals: list[Goal],
    options: PlannerOptions,
) -> bool:
    """``searched`` copies within the data slack of the least any plan leaving the brokers as it does
    needs (``relaxation.data_bound``): a second plan could save at most that slack, not worth the
    other starts' CPU."""
    model = ClusterModel(snapshot, options)
    for goal in goals:
        goal.reset()
    return searched.bytes_to_move <= (1.0 + _slack(options)) * data_bound(model, levels, goals)


def _slack(options: PlannerOptions) -> float:
    return DATA_SLACK if options.data_slack is None else options.data_slack


# The resources measured as rates over a window (re-measuring them moves them by noise); disk is
# log sizes.
RATES = ("network_in", "network_out")


def _better(relaxed: Plan, searched: Plan, options: PlannerOptions, goals: list[Goal]) -> bool:
    """``relaxed`` copies less data than ``searched`` and leaves nothing worse. Data first, moves
    second, as in the search: a plan with more replica moves must copy less by the data slack in
    proportion to the moves it adds (a tenth more moves, a tenth of the slack; twice as many or more,
    the whole slack), so one added move never outweighs a large saving of data; unless it brings a
    goal within its threshold that ``searched`` leaves outside (a count goal's band, say, that needs
    hundreds of moves onto new brokers): those moves are that goal's price, not a cost of the data.
    Nothing worse: each resource's balance figure met (within its threshold or BOUND_TOLERANCE of
    its bound, as the goals count it; a rate within the band they optimize to, the threshold's
    BALANCE_MARGIN or TARGET_OVER_BOUND x its bound, where ``searched`` is: the noise margin a replan
    of re-measured rates needs to stay quiet) or no higher than ``searched``'s, and its goal within its
    threshold where ``searched``'s is (its floor too, which the figure does not see); every other
    goal no further outside its limits, or (a soft goal) within its threshold, where it would
    propose nothing: the band a soft goal optimizes into is narrower, and a hair outside it is not
    worth the other plan's data. An all-or-nothing goal (the counts) that both plans leave outside
    its band is not compared: it keeps no move short of its band, so its distance there is what the
    other goals' moves happened to leave."""
    added = max(relaxed.replica_moves - searched.replica_moves, 0) / max(searched.replica_moves, 1)
    if any(
        r.within_threshold and not s.within_threshold
        for r, s in zip(relaxed.goals, searched.goals, strict=True)
    ):
        added = 0.0  # the moves are the price of a goal ``searched`` leaves outside its threshold
    if relaxed.bytes_to_move * (1.0 + _slack(options) * min(added, 1.0)) >= searched.bytes_to_move:
        return False
    for resource in RESOURCES:
        # Met within the band that triggers the goal; but for a rate where ``searched`` keeps within
        # the band the goals optimize to, only within that one: the noise margin a replan needs to
        # stay quiet is not given away for data. (Disk is log sizes, measured without that noise.)
        threshold, bound = options.threshold(resource), searched.lower_bound[resource]
        met = max(threshold, (1.0 + BOUND_TOLERANCE) * bound)
        target = max(1.0 + BALANCE_MARGIN * (threshold - 1.0), TARGET_OVER_BOUND * bound)
        if resource in RATES and searched.after[resource] <= target + 1e-9:
            met = target
        if relaxed.after[resource] > max(searched.after[resource], met) + 1e-9:
            return False
    return all(
        # A resource's goal: its balance figure is compared above, but that figure (the hottest
        # broker) never sees a broker left under the goal's floor (a new broker half empty).
        (r.within_threshold or not s.within_threshold)
        if r.goal in BALANCED_RESOURCE
        else (
            r.after <= max(s.after, UNMET_TOLERANCE) * (1 + 1e-9)
            or (not goal.hard and r.within_threshold)
            or (goal.all_or_nothing and s.after > UNMET_TOLERANCE)
        )
        for r, s, goal in zip(relaxed.goals, searched.goals, goals, strict=True)
    )


def _search(
    snapshot: Mapping[str, Any],
    goals: list[Goal],
    options: PlannerOptions,
    started: float,
    *,
    levels: np.ndarray | None = None,
    beat: int = 0,
    exact: bool = False,
) -> tuple[Plan | None, ClusterModel]:
    """Run ``goals`` in sweeps on the snapshot's model and build the plan, with the model it
    leaves. With ``levels`` (a first plan's final loads), from the relaxation's placement within them
    (planner.relaxation; ``exact``: its exact start); no plan where that moves nothing or copies
    ``beat`` bytes or more."""
    model = ClusterModel(snapshot, options)
    for goal in goals:
        goal.reset()  # limits cached for an earlier model (a new one may have its id)
    before = figures(model)
    bound = {r: model.lower_bound(i) for i, r in enumerate(RESOURCES)}
    # Each goal's report starts from the snapshot, whatever the relaxation moved first.
    start = [(g.metric(model), g.violated(model)) for g in goals] if levels is not None else None
    if levels is not None and (not relax(model, levels, goals, exact=exact) or model.bytes_moved >= beat):
        return None, model  # nothing moved, or already as much data as the plan to beat
    reports: list[GoalReport] = []
    ran_at: list[int | None] = [None] * len(goals)
    for sweep in range(MAX_SWEEPS):
        # Another sweep from where the last one ended, as a replan of the executed plan would
        # start (limits recomputed from today's loads): a plan is done when a whole sweep finds
        # nothing, so that replanning an executed plan proposes nothing either.
        applied = len(model.log)
        for i, goal in enumerate(goals):
            if ran_at[i] == len(model.log):
                continue  # nothing moved since this goal last started: it would find the same
            ran_at[i] = len(model.log)
            goal.reset()
            # A capacity goal a later sweep finds unmet was left unmet by its first run (every goal
            # after it keeps it met): what room the later goals made it takes only where they
            # accept, or a capacity no placement meets trades their balance for a sliver of it.
            # (A drain or the rack goal still takes what it needs: an operator asked for those.)
            later = sweep > 0 and isinstance(goal, CapacityGoal)
            optimized = [g for g in goals if g is not goal] if later else goals[:i]
            report = goal.run(model, tuple(optimized), options)
            if sweep == 0:
                reports.append(report)
            else:
                reports[i] = reports[i].then(report)
        if len(model.log) == applied:
            break
    kept = len(model.log)
    undo_needless(model, goals)
    pruned = len(model.log) > kept  # every goal takes each return: its metric can only have fallen
    reports = [
        dataclasses.replace(
            r, after=g.metric(model) if pruned else r.after, within_threshold=not g.violated(model)
        )
        for r, g in zip(reports, goals, strict=True)
    ]
    if start is not None:
        reports = [
            dataclasses.replace(r, before=b, violated=r.violated or v)
            for r, (b, v) in zip(reports, start, strict=True)
        ]
    unsatisfied = tuple(f"{r.goal}: still {r.after:.4g} outside its limits" for r in reports if r.unmet)
    notes = tuple(n for g in goals for n in g.notes())
    if model.drained.any() and model.rack_aware and model.n_live_racks < model.n_racks:
        notes += (
            f"the drained brokers hold every broker of {model.n_racks - model.n_live_racks} rack(s): "
            f"partitions now span at most {model.n_live_racks} racks",
        )
    actions = build_actions(model)
    found = Plan(
        actions=actions,
        before=before,
        after=figures(model),
        lower_bound=bound,
        bytes_to_move=sum(a.bytes_to_move for a in actions),
        leader_moves=sum(1 for a in actions if a.kind == ActionKind.LEADERSHIP),
        replica_moves=sum(a.moved_replicas for a in actions),
        total_bytes=total_bytes(model),
        unsatisfied=unsatisfied,
        goals=tuple(reports),
        seconds=time.perf_counter() - started,
        drain_brokers=tuple(int(b) for b in model.broker_ids[model.drained].tolist()),
        notes=notes,
    )
    return found, model
