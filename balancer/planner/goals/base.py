"""Goals: small plug-ins with one contract (after Cruise Control's AbstractGoal).

``name``, ``hard``, ``accept(move, model) -> bool``, ``optimize(model, optimized_goals, options)``.
Goals run in priority order; every move a goal proposes must be accepted by each goal already
optimized, so later goals never undo earlier ones. ``run`` measures the goal's own metric
before and after ``optimize`` and raises :class:`GoalError` if it got worse.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..actions import Move
from ..model import ClusterModel
from ..options import PlannerOptions
from ..result import GoalReport
from ..search.constants import EPS


class GoalError(RuntimeError):
    """A goal broke its own contract (made its own metric worse)."""


class Goal:
    name = "goal"
    hard = False
    all_or_nothing = False  # keep this goal's moves only if they bring it within its band

    def accept(self, move: Move, model: ClusterModel) -> bool:
        """Whether this goal lets ``move`` apply. A goal refuses a move only for its partitions'
        placement, or because a broker would carry too much of what it gains or too little of
        what it loses: pruning tries a refused return again only after one of those changed
        (prune.Refusals)."""
        return True

    def bounds(self, model: ClusterModel) -> tuple[int, list[float], list[float]] | None:
        """``accept`` as per-broker bounds on one dimension of the model's loads, where it is exactly
        that: (the dimension, the most utilization a broker gaining load may reach, the least one
        losing load may keep), both as Python floats. A move that changes the dimension by nothing
        is accepted. None (the default): ``accept`` is asked move by move. Read only while the goal
        keeps the limits it has for ``model``."""
        return None

    def reset(self) -> None:
        """Forget limits cached for a model: the next sweep computes them from today's loads."""

    def metric(self, model: ClusterModel) -> float:
        """Lower is better; 0 means satisfied."""
        return 0.0

    def violated(self, model: ClusterModel) -> bool:
        """The goal has work to do (soft goals: some broker is outside the band that triggers a plan)."""
        return self.metric(model) > EPS

    def optimize(self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions) -> None:
        return None

    def notes(self) -> tuple[str, ...]:
        """Why the goal could not do all it was asked in its last ``optimize`` (for ``Plan.notes``)."""
        return ()

    def run(
        self, model: ClusterModel, optimized_goals: Sequence[Goal], options: PlannerOptions
    ) -> GoalReport:
        before = self.metric(model)
        violated = self.violated(model)
        moves = model.moves_applied
        mark, swapped = len(model.log), set(model.swapped)
        if violated:
            self.optimize(model, tuple(optimized_goals), options)
        after = self.metric(model)
        if violated and self.all_or_nothing and self.violated(model):
            # An unfixable violation proposes nothing (Cruise Control's goal violation detector):
            # otherwise the moves that noise happens to allow creep in, a few every window.
            model.undo_to(mark, swapped)
            after, moves = self.metric(model), model.moves_applied
        if after > before + EPS * max(1.0, abs(before)):
            raise GoalError(f"goal {self.name} made its own metric worse: {before:.6g} -> {after:.6g}")
        return GoalReport(self.name, self.hard, before, after, violated, model.moves_applied - moves)

    @staticmethod
    def try_move(move: Move, model: ClusterModel, optimized_goals: Sequence[Goal]) -> bool:
        """Apply ``move`` if the plan's caps allow it and no optimized goal vetoes it."""
        for goal in optimized_goals:
            if not goal.accept(move, model):
                return False
        if not model.allowed(move) or not model.within_caps(move):
            return False
        model.apply(move)
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
