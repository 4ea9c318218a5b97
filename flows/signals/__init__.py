"""Signals: a shard's raw points of one window enter, with the job placement of its GPUs.

One value per entity and signal leaves (plus checkpoint pauses), for the judges to weigh.
"""

from typing import Any

_DERIVE_CLASSES = {"CounterMemory", "WindowSignals", "SignalDef"}


def __getattr__(name: str) -> Any:
    """Recovery state pickled before the rooms names these classes in a module ``signals``."""
    if name in _DERIVE_CLASSES:
        from reflex_localize.flows.signals import derive

        return getattr(derive, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
