"""The search the resource goals share: shed brokers over the goal's upper limit, fill those under
its lower limit, by leadership transfers, replica moves and swaps as the goal allows.

Every move goes through ``Goal.try_move``: each goal already optimized must accept it. The goal
searching states its policy by its hooks (``ResourceGoal``); the search keeps its own state in the
``SearchContext`` and changes no goal.
"""

from __future__ import annotations

from .constants import OPTIMIZE_PASSES
from .context import SearchContext
from .fill import fill_all
from .shed import shed_all

__all__ = ["SearchContext", "optimize"]


def optimize(ctx: SearchContext) -> None:
    """Shed, then fill; again after a pass that moved something, up to OPTIMIZE_PASSES passes."""
    model = ctx.model
    for _ in range(OPTIMIZE_PASSES):
        before = model.moves_applied
        shed_all(ctx)
        fill_all(ctx)
        if model.moves_applied == before:
            break
