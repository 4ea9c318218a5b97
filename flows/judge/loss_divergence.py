"""Silent data corruption's one trace: one data-parallel replica's loss jumps alone.

A GPU that computes wrong without an error leaves no hardware signal. What it does leave is
in the model: the replica it serves computes its loss on corrupted activations, so at the
first bad step that replica's loss stands far above every other replica's; one step later
the gradients have been averaged and the whole job's loss jumps together (and then nothing
points at a replica any more). So the step to look at is the first one, where a small group
of ranks (one replica: its pipeline stages, its tensor-parallel ranks) is out and the rest
are not. A bad batch served to one replica gives the same sign, which is why the event says
"suspected" and asks for a diagnostic before a drain.

>>> import numpy as np
>>> loss = np.array([2.0, 2.1, 12.0, 1.9, 2.0, 2.05, 12.3, 1.95])
>>> diverging_ranks(np.arange(8), np.full(8, 41), loss, world=8)
(41, [2, 6])
>>> hard_batch = np.array([2.0, 2.1, 2.7, 1.9, 2.0, 2.05, 2.6, 1.95])
>>> diverging_ranks(np.arange(8), np.full(8, 42), hard_batch, world=8) is None
True
>>> diverging_ranks(np.arange(8), np.full(8, 43), np.full(8, 7.0), world=8) is None
True
"""

from __future__ import annotations

import numpy as np

LOSS_SIGNAL = "loss_divergence"  # the evidence a suspect of this kind carries
# A replica's loss this many times the step's median is no batch-to-batch noise (replicas
# of one step differ by a few percent; a hard batch by tens of percent).
LOSS_JUMP = 3.0
# More ranks than this share out at once is the whole job (the step after the allreduce,
# a learning-rate blow-up), not one replica.
MAX_SHARE = 0.25
# A step is judged only when at least this share of the world reported its loss in the
# window (a step cut by the window's edge has too few ranks for a median).
MIN_REPORTING = 0.5


def diverging_ranks(
    ranks: np.ndarray, steps: np.ndarray, loss: np.ndarray, world: int
) -> tuple[int, list[int]] | None:
    """The first step of the window whose loss jumped on a few ranks only: (step, ranks).

    Ranks that report no loss (NaN) or a non-positive one (pipeline stages before the last
    often log 0) take no part."""
    usable = np.isfinite(loss) & (loss > 0)
    if not usable.any():
        return None
    ranks, steps, loss = ranks[usable], steps[usable], loss[usable]
    for step in np.unique(steps).tolist():
        mine = steps == step
        values = loss[mine]
        if len(values) < max(4, MIN_REPORTING * world):
            continue
        out = values > LOSS_JUMP * float(np.median(values))
        if out.any() and out.sum() <= MAX_SHARE * len(values):
            return int(step), sorted(int(r) for r in ranks[mine][out].tolist())
    return None


def spans(numbers: list[int]) -> str:
    """Sorted numbers as runs, for an operator to read: ``8-15, 40-47``.

    >>> spans([8, 9, 10, 40, 42, 43])
    '8-10, 40, 42-43'
    """
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
