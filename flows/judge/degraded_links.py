"""Links that run below what they are capable of while a job runs on them, told as a warning
of their part: a GPU's PCIe link trained down in width (LnkSta < LnkCap), a port whose rate
fell below the rate it ran at before.

These are facts of the hardware, not statistics: they raise no XID and need not slow the
job's steps measurably (a GPU at x8 still computes; the job may hide its host traffic), so a
job's slowdown may never point at them while another fault of the job leads every event.
Operators check them in health checks and drain the node at the next chance. Only a change
is told: a GPU link seen at its full width under load before, a port seen at a higher rate
(a fleet whose links all run narrower than they report, by design, is normal). The change
is what backs the warning, not the part's score, which may still be building when it is
told (flows/judge/job_triggers.py); a port that carries none of the job's collectives still
needs its score.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.messages import ExplicitEvent
from reflex_localize.flows.signals.derive import SIGNAL_NAMES

# Windows a link must stay degraded under load before it is told: a link retrains in a
# window or two after a reset, and a port's rate reads low in the window it comes back up.
HOLD_WINDOWS = 3
# A window counts as degraded when most of its samples are (a GPU link's width).
MOSTLY = 0.5
# A port's rate below this share of its best under load is degraded (400 -> 200 Gb/s).
RATE_SHARE = 0.9

_WIDTH = SIGNAL_NAMES.index("pcie_downgrade")  # share of samples below the maximum width
_RATE = SIGNAL_NAMES.index("nic_rate_low")  # a port's mean rate in Gb/s

# The kinds this module tells (each a change of the link, which backs it).
KINDS = frozenset({"pcie_downtrained", "port_rate_low"})

_TOLD = {
    "pcie_downtrained": (
        "PCIe link trained below its maximum width under load (LnkSta < LnkCap)",
        "drain at the next chance; reseat the GPU or its riser, replace it if it recurs",
    ),
    "port_rate_low": (
        "port runs below the rate it ran at before, under load",
        "check the cable and transceiver; replace them if the rate stays low",
    ),
}


@dataclass
class DegradedLinks:
    """Per part, the windows in a row it has been degraded under load; per port, its best
    rate under load (what it is capable of)."""

    held: dict[str, int] = field(default_factory=dict)
    best_rate: dict[str, float] = field(default_factory=dict)
    full_width: set[str] = field(default_factory=set)  # GPUs seen at full width under load

    def observe(
        self, entities: np.ndarray, values: np.ndarray, busy_nodes: set[str], end_ns: int
    ) -> list[ExplicitEvent]:
        """This window's signals of every part; a warning for each part whose link has just
        been degraded under load for HOLD_WINDOWS. A part that recovers may be told again."""
        told = []
        for row, entity in enumerate(entities.tolist()):
            node, component, index = entity.split("|")
            if node not in busy_nodes or component not in ("gpu", "nic"):
                continue
            kind = self._degraded(entity, component, values[row])
            if kind is None:
                self.held.pop(entity, None)
                continue
            self.held[entity] = self.held.get(entity, 0) + 1
            if self.held[entity] == HOLD_WINDOWS:
                meaning, action = _TOLD[kind]
                told.append(
                    ExplicitEvent(end_ns, node, kind, 0, component, index, "warning", meaning,
                                  action)
                )  # fmt: skip
        return told

    def _degraded(self, entity: str, component: str, row: np.ndarray) -> str | None:
        if component == "gpu":
            width = row[_WIDTH]
            if not np.isfinite(width):
                return None
            if width < MOSTLY:
                self.full_width.add(entity)
                return None
            return "pcie_downtrained" if entity in self.full_width else None
        rate = row[_RATE]
        if not np.isfinite(rate) or rate <= 0:
            return None  # no reading, or the port is down: its link events tell that
        best = self.best_rate.get(entity, 0.0)
        if rate >= best:
            self.best_rate[entity] = float(rate)
            return None
        return "port_rate_low" if rate < RATE_SHARE * best else None
