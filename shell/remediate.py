"""``reflex remediate``: drains (Slurm) or cordons and taints (Kubernetes) the node of each
confirmed hardware verdict in the flow's ``events.jsonl``. Dry run unless ``--apply``; only nodes
``--allow`` names; every action in ``--log`` with the command that undoes it
(``reflex remediate --undo EVENT_ID``). See :mod:`shell.remediation`.

>>> from click.testing import CliRunner
>>> "--apply" in CliRunner().invoke(command, ["--help"]).output
True
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.shell.remediation import SCHEDULERS, Policy, Remediator, run_command


@click.command(name="remediate")
@click.option("--events", "events_path", type=click.Path(path_type=Path),
              help="The flow's events.jsonl (reflex flow --out DIR).")  # fmt: skip
@click.option("--scheduler", type=click.Choice(SCHEDULERS), required=True,
              help="slurm: scontrol drain; kubernetes: kubectl cordon and taint.")  # fmt: skip
@click.option("--allow", multiple=True, metavar="PATTERN",
              help="Node names that may be acted on (shell patterns). None: no node.")  # fmt: skip
@click.option("--min-confidence", default=0.8, show_default=True, type=float)
@click.option("--max-nodes", default=2, show_default=True, type=int,
              help="Nodes acted on at most, across runs, until undone.")  # fmt: skip
@click.option("--log", "log_path", type=click.Path(path_type=Path), show_default=True,
              default=Path("/var/lib/reflex/remediation.jsonl"),
              help="The action log: what was done (or would be), and how to undo it.")  # fmt: skip
@click.option("--apply", is_flag=True, help="Run the commands. Without it, print them only.")
@click.option("--follow", is_flag=True, help="Keep reading events as the flow appends them.")
@click.option("--undo", "undo_event", metavar="EVENT_ID", help="Reverse one event's actions.")
def command(
    events_path: Path | None,
    scheduler: str,
    allow: tuple[str, ...],
    min_confidence: float,
    max_nodes: int,
    log_path: Path,
    apply: bool,
    follow: bool,
    undo_event: str | None,
) -> None:
    """Drain or cordon the node of each confirmed hardware verdict (dry run by default)."""
    policy = Policy(scheduler, allow, min_confidence, max_nodes)
    remediator = Remediator(policy, log_path, run_command if apply else None, say=click.echo)
    if undo_event:
        if not remediator.undo(undo_event):
            raise click.ClickException(f"no applied action of event {undo_event} in {log_path}")
        return
    if events_path is None:
        raise click.UsageError("--events is needed (or --undo EVENT_ID)")
    if not allow:
        click.echo("# no --allow: no node may be acted on", err=True)
    read = 0
    while True:
        lines = events_path.read_text().splitlines() if events_path.exists() else []
        remediator.handle(LocalizationEvent.from_json(line) for line in lines[read:] if line)
        read = len(lines)
        if not follow:
            return
        time.sleep(5.0)
