"""``reflex collect``: the node agent's command line.

``reflex collect --once --stdout`` runs every collector once and prints line protocol;
without ``--stdout`` the points go to InfluxDB through ``influx.writer.Writer``; without
``--once`` it runs until SIGTERM or SIGINT. Configuration: ``--config FILE`` (TOML, sections
``[influx]``, ``[identity]``, ``[collect]``) overlaid by the ``REFLEX_*`` environment.

>>> from click.testing import CliRunner
>>> result = CliRunner().invoke(command, ["--help"])
>>> "--once" in result.output
True
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import click

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.agent_metrics import serve_agent_health
from reflex_localize.collectors.journal import Journal
from reflex_localize.collectors.registry import build_collectors
from reflex_localize.collectors.settings import CollectSettings
from reflex_localize.collectors.sinks import StdoutSink, WriterSink
from reflex_localize.influx.clock_offset import ClockOffset
from reflex_localize.influx.config import Config, ConfigError
from reflex_localize.schemas.codec import PointError
from reflex_localize.shell.cli_checks import check_token, influx_refusals
from reflex_localize.shell.influx_options import InfluxOptions, influx_options

log = logging.getLogger("reflex.collect")


def _writer_sink(
    config: Config, settings: CollectSettings, clock_offset: ClockOffset
) -> WriterSink:
    from reflex_localize.influx.writer import (
        Writer,  # imported here: --stdout needs no InfluxDB client
    )

    influx = config.influx
    if not influx.configured:
        raise ConfigError("[influx].url: not set (REFLEX_INFLUX_URL), and --stdout not given")
    check_token(influx, service=True)  # an agent spools while InfluxDB is away
    writer = Writer.from_settings(influx, Path(settings.spool_dir), clock_offset=clock_offset)
    if not writer.probe_clock():
        log.info("InfluxDB did not answer a clock probe; the first writes will measure it")
    journal = Journal(Path(settings.spool_dir) / "journal")
    return WriterSink(writer, flush_interval_s=settings.flush_interval_s, journal=journal)


@click.command(name="collect")
@influx_options
@click.option("--once", is_flag=True, help="Run every collector once, then exit.")
@click.option("--stdout", is_flag=True, help="Print line protocol instead of writing to InfluxDB.")
@click.option("--health-address", envvar="REFLEX_HEALTH_ADDRESS", metavar="HOST:PORT",
              help="Serve /healthz and Prometheus /metrics here (off by default).")  # fmt: skip
def command(influx: InfluxOptions, once: bool, stdout: bool, health_address: str | None) -> None:
    """Collect GPU, host, NIC and kernel telemetry on this node."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = influx.config()
        settings = config.section("collect", CollectSettings)
        collectors = build_collectors(config.identity, settings)
        clock_offset = ClockOffset(
            tolerance_s=settings.clock_tolerance_s, correct=settings.clock_correction
        )
        sink = StdoutSink() if stdout else _writer_sink(config, settings, clock_offset)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    try:
        agent = Agent(
            collectors,
            sink.emit,
            cluster=config.identity.cluster,
            node=config.identity.node,
            clock_offset=None if stdout else clock_offset,
            site=config.identity.site,  # [identity] rack, switch: on every point
        )
    except PointError as error:  # a rack or switch line protocol cannot carry
        sink.close()
        raise click.ClickException(f"[identity]: {error}") from None
    health = None
    if health_address and not once:
        spool = None if stdout else Path(settings.spool_dir)
        try:
            health = serve_agent_health(health_address, agent, sink, spool)
        except (ValueError, OSError) as error:  # a malformed address, a port in use
            sink.close()
            raise click.ClickException(f"--health-address {health_address}: {error}") from None
    try:
        if once:
            agent.run_once()
            if (failure := agent.nothing_worked()) is not None:
                raise click.ClickException(failure)
        else:
            stop = threading.Event()
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stop.set())
            log.info("collecting %s on %s", ", ".join(settings.enabled), config.identity.node)
            agent.run(stop)
    finally:
        if health is not None:
            health.stop()
        for collector in collectors:
            close = getattr(collector, "close", None)
            if close is not None:
                close()
        # The writer's last delivery is where a token that may not write shows: one line.
        with influx_refusals(config.influx.url):
            sink.close()
