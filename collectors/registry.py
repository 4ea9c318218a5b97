"""Which module builds each collector named in ``[collect].enabled``.

Each collector module has a ``build(identity, settings)`` next to it; it is imported only when
enabled, so a node without NVML never imports the GPU collector's dependencies.
"""

from __future__ import annotations

import importlib

from reflex_localize.collectors.base import Collector
from reflex_localize.collectors.settings import COLLECTOR_NAMES, CollectSettings
from reflex_localize.influx.config import ConfigError, Identity

COLLECTOR_MODULES = {name: f"reflex_localize.collectors.{name}" for name in COLLECTOR_NAMES}
COLLECTOR_MODULES["host_fs"] = "reflex_localize.collectors.filesystems"
COLLECTOR_MODULES["hook"] = "reflex_localize.collectors.hook_receiver"


def build_collectors(identity: Identity, settings: CollectSettings) -> list[Collector]:
    unknown = set(settings.enabled) - set(COLLECTOR_MODULES)
    if unknown:
        raise ConfigError(
            f"[collect].enabled: unknown collectors {sorted(unknown)} "
            f"(known: {', '.join(COLLECTOR_MODULES)})"
        )
    collectors = []
    for name in settings.enabled:
        module = importlib.import_module(COLLECTOR_MODULES[name])
        collectors.append(module.build(identity, settings))
    return collectors
