"""The ``reflex`` console script. Each subcommand lives next to the code it drives and is
imported only when invoked, so ``reflex collect`` on a node never imports bytewax or sklearn."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command.
SUBCOMMANDS = {
    "collect": "collectors.agent_cli:command",
    "simulate": "collectors.simulated.cli:command",
    "localize": "flows.localize_cli:command",
    "eval": "flows.evaluate_cli:command",
    "fit": "flows.fit_cli:command",
    "flow": "flows.production_cli:command",
    "demo": "reflex.demo:command",
    "report": "reflex.report_cli:command",
    "alerts": "dashboards.alerts_cli:command",
    "influxdb": "reflex.influxdb_cli:command",
    "smoke": "reflex.smoke:command",
    "tokens": "reflex.tokens_cli:command",
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
            raise
        command: click.Command = getattr(module, attribute)
        return command


@click.group(cls=LazyGroup)
@click.version_option(package_name="reflex-localize")
def main() -> None:
    """Reflex: finds the faulty node of a large training job from its telemetry."""
