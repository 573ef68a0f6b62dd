"""The search the resource goals share: shed brokers over the goal's upper limit, fill those under
its lower limit, by leadership transfers, replica moves and swaps as the goal allows.

Every move goes through ``SearchContext.try_move`` (``Goal.try_move``'s verdicts, judged by
``Checks``): each goal already optimized must accept it. The goal
searching states its policy by its hooks (``ResourceGoal``); the search keeps its own state in the
``SearchContext`` and changes no goal.
"""

from __future__ import annotations

from .constants import EPS, OPTIMIZE_PASSES
from .context import SearchContext
from .fill import fill_all
from .leadership import assign_leaderships, assignable
from .shed import shed_all

__all__ = ["SearchContext", "optimize"]


def optimize(ctx: SearchContext) -> None:
    """Shed, then fill; again after a pass that moved something, up to OPTIMIZE_PASSES passes.

    Where the goal assigns leaderships and those passes copied data, they are tried again after the
    leaderships are assigned as a whole (``assign_leaderships``): the second search is kept if it ends
    the goal no worse and copies less."""
    model, goal = ctx.model, ctx.goal
    mark, swapped, data, barren = len(model.log), set(model.swapped), model.bytes_moved, dict(ctx.barren)
    _passes(ctx)
    if not goal.assigns_leaderships or model.bytes_moved <= data or not assignable(model):
        return
    first, first_metric, first_data = model.log[mark:], goal.metric(model), model.bytes_moved
    model.undo_to(mark, swapped)
    if assign_leaderships(ctx):
        ctx.barren = barren  # the second search starts as the first did
        _passes(ctx)
        if (
            goal.metric(model) <= first_metric + EPS * max(1.0, first_metric)
            and model.bytes_moved < first_data
        ):
            return
        model.undo_to(mark, swapped)
    for move in first:
        model.apply(move)


def _passes(ctx: SearchContext) -> None:
    model = ctx.model
    # Each side of the band triggers itself: where only a broker under the floor makes the goal act,
    # the brokers between the band it optimizes to and the one that triggers it are not shed, as
    # noise alone takes them in and out of it from window to window (and a floor no move reaches
    # would otherwise move data every time they drift over).
    sheds = ctx.goal.over_trigger(model)
    for _ in range(OPTIMIZE_PASSES):
        before = model.moves_applied
        if sheds:
            shed_all(ctx)
        fill_all(ctx)
        if model.moves_applied == before:
            break
