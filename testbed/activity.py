"""What each node's GPUs are doing at each sample time, from the jobs' steps."""

from __future__ import annotations

import numpy as np

from testbed.timeline import RANKS_PER_NODE, Steps

IDLE, LOADING, TRAIN, CKPT, HANG = 0, 1, 2, 3, 4


class NodeActivity:
    """Phase of a node (idle, loading, training, checkpointing, hung) and each GPU's share of a
    step spent computing, at sample times."""

    def __init__(self, node: int, steps: list[Steps]) -> None:
        self.parts: list[tuple[Steps, int]] = []
        for s in steps:
            if node in s.seg.nodes:
                self.parts.append((s, s.seg.nodes.index(node)))

    def at(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
        phase = np.full(len(ts), IDLE, dtype=np.int8)
        frac = np.zeros((len(ts), RANKS_PER_NODE))
        job: list[str | None] = [None] * len(ts)
        for s, pos in self.parts:
            seg = s.seg
            inside = (ts >= seg.start_s) & (ts < seg.end_s)
            if not inside.any():
                continue
            cols = slice(pos * RANKS_PER_NODE, (pos + 1) * RANKS_PER_NODE)
            for k in np.nonzero(inside)[0]:
                job[k] = s.job.name
            phase[inside] = LOADING
            if len(s.end):
                i = np.searchsorted(s.end, ts)
                valid = inside & (i < len(s.end)) & (ts >= s.start[0])
                ii = np.minimum(i, len(s.end) - 1)
                span = s.end[ii] - s.start[ii]
                ck = s.ckpt[ii]
                in_ckpt = valid & (ts >= s.end[ii] - ck) & (ck > 0)
                phase[valid] = TRAIN
                phase[in_ckpt] = CKPT
                busy = np.maximum(span - ck, 1e-6)[:, None]
                frac[valid] = np.clip(s.compute[ii][:, cols] / busy, 0, 1)[valid]
                after = inside & (i >= len(s.end)) & (ts >= s.start[0])
                frac[after] = np.clip(s.compute[-1, cols] / max(span[-1], 1e-6), 0, 1)
                phase[after] = TRAIN
            if seg.hang_at_s is not None:
                phase[inside & (ts >= seg.hang_at_s)] = HANG
        return phase, frac, job
