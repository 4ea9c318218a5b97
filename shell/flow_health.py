"""``/healthz`` and ``/metrics`` for each process of ``reflex flow`` (see
:mod:`reflex_localize.flows.flow_metrics` for what they say).

``REFLEX_HEALTH_ADDRESS`` (``HOST:PORT``, set by ``reflex flow --health-address``) is where
each process serves; but the processes of ``reflex flow -p N`` share a host, so there
(``REFLEX_HEALTH_PORT_PER_PROCESS=1``) process ``K`` serves on ``PORT + K``. Processes on
their own hosts (``-i K -a ...``, a StatefulSet's pods) all serve on ``PORT``. The metrics go
into Prometheus' default registry, which Bytewax's own ``/metrics`` serves too when
``BYTEWAX_DATAFLOW_API_ENABLED=true``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bytewax.inputs import Source
from prometheus_client import REGISTRY, CollectorRegistry

from reflex_localize.flows.flow_metrics import FlowMetrics, metered_sinks, metered_source
from reflex_localize.flows.impact.model_file import ImpactModelFile
from reflex_localize.flows.io.sinks import FlowSinks
from reflex_localize.influx.health_server import HealthServer, parse_address

ENV_ADDRESS = "REFLEX_HEALTH_ADDRESS"


def process_index(argv: list[str] | None = None) -> int:
    """This process's ``-i`` in ``python -m bytewax.run`` (or ``BYTEWAX_PROCESS_ID``), else 0.

    >>> process_index(["run.py", "mod:flow()", "-i", "2", "-a", "h:1;h:2;h:3"])
    2
    """
    args = sys.argv if argv is None else argv
    for flag in ("-i", "--process-id"):
        if flag in args[:-1]:
            return int(args[args.index(flag) + 1])
    return int(os.environ.get("BYTEWAX_PROCESS_ID", "0"))


def with_health(
    source: Source,
    sinks: FlowSinks,
    out: Path | None,
    registry: CollectorRegistry = REGISTRY,
    impact: ImpactModelFile | None = None,
) -> tuple[Source, FlowSinks, HealthServer | None]:
    """The source and sinks metered, and the server started, when ``REFLEX_HEALTH_ADDRESS`` is
    set; else they are returned as they are."""
    address = os.environ.get(ENV_ADDRESS)
    if not address:
        return source, sinks, None
    host, port = parse_address(address)
    metrics = FlowMetrics(registry, spool_dir=out / "spool" if out else None)
    if impact is not None:
        metrics.watch_impact_model(impact)
    if port and os.environ.get("REFLEX_HEALTH_PORT_PER_PROCESS") == "1":
        port += process_index()
    server = HealthServer((host, port), metrics.problem, registry)
    server.start()
    return metered_source(source, metrics), metered_sinks(sinks, metrics), server
