"""The ``reflex`` console script. Each subcommand is a module of the shell named after it,
imported only when invoked, so ``reflex collect`` on a node never imports bytewax or sklearn."""

from __future__ import annotations

import importlib
import importlib.util

import click

from reflex_localize.shell.install_extras import EXTRA_OF_COMMAND, missing_extra
from reflex_localize.shell.logging_setup import (
    ENV_FORMAT,
    ENV_LEVEL,
    FORMATS,
    LEVELS,
    configure_logging,
)

# name -> "module:attribute" of a click command.
SUBCOMMANDS = {
    "collect": "reflex_localize.shell.collect:command",
    "simulate": "reflex_localize.shell.simulate:command",
    "localize": "reflex_localize.shell.localize:command",
    "eval": "reflex_localize.shell.eval:command",
    "fit": "reflex_localize.shell.fit:command",
    "fit-impact": "reflex_localize.shell.fit_impact:command",
    "flow": "reflex_localize.shell.flow:command",
    "demo": "reflex_localize.shell.demo:command",
    "report": "reflex_localize.shell.report:command",
    "alerts": "reflex_localize.shell.alerts:command",
    "influxdb": "reflex_localize.shell.influxdb:command",
    "smoke": "reflex_localize.shell.smoke:command",
    "tokens": "reflex_localize.shell.tokens:command",
    "replication": "reflex_localize.shell.replication:command",
    "setup": "reflex_localize.shell.setup:command",
    "remediate": "reflex_localize.shell.remediate:command",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and module_name.startswith(error.name):
                raise click.ClickException(f"'reflex {cmd_name}' is not built yet") from None
            if error.name and not error.name.startswith("reflex_localize"):
                raise click.ClickException(missing_extra(cmd_name, error.name)) from None
            raise
        command: click.Command = getattr(module, attribute)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Says what a command needs before it runs: the flow's commands import bytewax only in
        their worker processes, which would fail there with a traceback (Python 3.13 has no
        bytewax wheels, so the [flow] extra leaves it out)."""
        name, command, rest = super().resolve_command(ctx, args)
        needs_bytewax = EXTRA_OF_COMMAND.get(name or "") in ("flow", "all")
        if needs_bytewax and not installed("bytewax"):
            raise click.ClickException(missing_extra(name or "", "bytewax"))
        return name, command, rest


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup)
@click.version_option(package_name="reflex-localize")
@click.option("--log-level", type=click.Choice(LEVELS), envvar=ENV_LEVEL,
              help="Log level of every command (and of reflex flow's workers).")  # fmt: skip
@click.option("--log-format", type=click.Choice(FORMATS), envvar=ENV_FORMAT,
              help="text, or json: one object a line.  [default: text]")  # fmt: skip
def main(log_level: str | None, log_format: str | None) -> None:
    """Reflex: finds the faulty node of a large training job from its telemetry."""
    if log_level or log_format:  # else each command keeps its own default
        configure_logging(log_level or "info", log_format or "text")
