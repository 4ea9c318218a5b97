"""Old module names of the flow's classes, for recovery state pickled before the rooms.

Bytewax snapshots pickle each state by its class's module path, and a flow upgraded in place
unpickles them. The modules of ``flows/`` moved into rooms (``io``, ``signals``, ``judge``,
``incidents``, ``impact``); this finder answers each old name with the module's new home, so
a snapshot written by an older Reflex still restores its baselines.

>>> import importlib
>>> importlib.import_module("reflex_localize.flows.job_step").__name__
'reflex_localize.flows.judge.job_step'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

_PACKAGE = __name__.rpartition(".")[0]  # reflex_localize.flows
# Old module -> its room and new name. ``signals`` is the room's own name now: its package
# answers the three classes the old module held (flows/signals/__init__.py).
MOVED = {
    "sources": "io.sources",
    "influx_source": "io.influx_source",
    "push_source": "io.push_source",
    "push_receiver": "io.push_receiver",
    "sinks": "io.sinks",
    "influx_sink": "io.influx_sink",
    "plain_runs": "io.plain_runs",
    "shared_windows": "io.shared_windows",
    "stream_clock": "io.stream_clock",
    "shard_keys": "io.shard_keys",
    "signal_audit": "signals.audit",
    "job_pause": "signals.job_pause",
    "gpu_identity": "signals.gpu_identity",
    "visible_gpus": "signals.visible_gpus",
    "detectors": "judge.detectors",
    "thresholds": "judge.thresholds",
    "shard_step": "judge.shard_step",
    "job_step": "judge.job_step",
    "job_evidence": "judge.job_evidence",
    "step_peers": "judge.step_peers",
    "triggers": "judge.triggers",
    "rank_drift": "judge.rank_drift",
    "busy_clocks": "judge.busy_clocks",
    "explained_straggler": "judge.explained_straggler",
    "loss_divergence": "judge.loss_divergence",
    "liveness": "judge.liveness",
    "site_blame": "judge.site_blame",
    "weights": "judge.weights",
    "events": "incidents.events",
    "explain": "incidents.explain",
    "event_routing": "incidents.event_routing",
    "exit_messages": "incidents.exit_messages",
    "node_memory": "incidents.node_memory",
    "returning_part": "incidents.returning_part",
    "impact_fit": "impact.fit",
    "impact_model": "impact.model",
    "impact_model_file": "impact.model_file",
    "impact_rows_log": "impact.rows_log",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The module is the new one, already executed."""


class OldFlowModules(importlib.abc.MetaPathFinder):
    """Finds ``reflex_localize.flows.<old name>`` as the module in its room."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != _PACKAGE or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(f"{_PACKAGE}.{MOVED[name]}"))


def install() -> None:
    """Once per process; the flow's package calls it on import."""
    if not any(isinstance(finder, OldFlowModules) for finder in sys.meta_path):
        sys.meta_path.append(OldFlowModules())
