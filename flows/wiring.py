"""Builds the flow from REFLEX_* environment variables, for ``python -m bytewax.run``
(every process of a Bytewax cluster imports the flow the same way).

* ``REFLEX_SOURCE``: ``sim:SCENARIO[:SEED]`` or ``file:PATH.lp`` (``influx`` comes with the
  production source).
* ``REFLEX_SHARDS``: partitions of nodes (default 4).
* ``REFLEX_OUT``: directory for events.jsonl, outputs.lp, errors.jsonl.
"""

from __future__ import annotations

import os
from pathlib import Path

from bytewax.inputs import Source

from flows.localize import FlowSinks
from flows.sinks import file_sinks
from flows.sources import LineProtocolSource, SimulatorSource


class WiringError(ValueError):
    pass


def source_from_env(window_seconds: float) -> Source:
    spec = os.environ.get("REFLEX_SOURCE", "")
    shards = int(os.environ.get("REFLEX_SHARDS", "4"))
    kind, _, rest = spec.partition(":")
    if kind == "sim" and rest:
        scenario, _, seed = rest.partition(":")
        return SimulatorSource(scenario, int(seed or 7), shards, window_seconds)
    if kind == "file" and rest:
        return LineProtocolSource(Path(rest), shards, window_seconds)
    raise WiringError(f"REFLEX_SOURCE={spec!r}: expected sim:SCENARIO[:SEED] or file:PATH")


def sinks_from_env() -> FlowSinks:
    out = os.environ.get("REFLEX_OUT")
    if not out:
        raise WiringError("REFLEX_OUT is not set: the directory for the flow's outputs")
    return file_sinks(Path(out))
