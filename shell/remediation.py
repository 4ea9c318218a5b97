"""What to do about a confirmed hardware verdict: drain the node in Slurm, or cordon and taint it
in Kubernetes. Off unless asked for, dry-run unless told to apply, and only for nodes an
allow-list names.

A verdict is confirmed when the event is critical, names a hardware part (not "no hardware
fault") and is at least ``min_confidence`` sure. Each action is one command line, run without a
shell, with the command that undoes it; both go to the action log (JSON lines) before anything
runs, so every action can be reversed (:meth:`Remediator.undo`). At most ``max_nodes`` nodes are
acted on per run: many nodes at once are the fabric's or the site's fault, not theirs.

>>> from reflex_localize.flows.incidents.events import LocalizationEvent, Suspect
>>> event = LocalizationEvent("e1", 0, "c", "j", "explicit", "critical", 0.9,
...     [Suspect("gpu-7", "gpu", "3", 5.0)], "drain node; reset the GPU", "XID 79 on GPU 3")
>>> policy = Policy(scheduler="slurm", allow=("gpu-*",))
>>> [action.command() for action in plan(event, policy)]
["scontrol update nodename=gpu-7 state=drain 'reason=reflex e1: gpu 3: XID 79 on GPU 3'"]
>>> plan(event, Policy(scheduler="slurm", allow=("cpu-*",)))
'gpu-7 is not in the allow-list'
"""

from __future__ import annotations

import fnmatch
import json
import logging
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from reflex_localize.flows.incidents.events import NO_HARDWARE, LocalizationEvent

log = logging.getLogger(__name__)

SCHEDULERS = ("slurm", "kubernetes")
TAINT_KEY = "reflex.io/hardware-suspect"  # NoSchedule: running pods stay, new ones go elsewhere
REASON_CHARS = 120


@dataclass(frozen=True)
class Policy:
    """When to act and on what. An empty allow-list acts on nothing."""

    scheduler: str
    allow: tuple[str, ...] = ()  # shell-style patterns of node names
    min_confidence: float = 0.8
    max_nodes: int = 2


@dataclass(frozen=True)
class Action:
    """One command line for one node, and the one that undoes it."""

    event_id: str
    node: str
    argv: tuple[str, ...]
    undo_argv: tuple[str, ...]

    def command(self) -> str:
        return shlex.join(self.argv)


def confirmed(event: LocalizationEvent, min_confidence: float) -> str | None:
    """None when the event is a confirmed hardware verdict, else why not."""
    top = event.top
    if top is None or top.component == NO_HARDWARE:
        return "no hardware fault named"
    if event.severity != "critical":
        return f"severity {event.severity}, not critical"
    if event.confidence < min_confidence:
        return f"confidence {event.confidence:.2f} below {min_confidence:.2f}"
    return None


def plan(event: LocalizationEvent, policy: Policy) -> list[Action] | str:
    """The actions for a verdict, or why there are none."""
    why_not = confirmed(event, policy.min_confidence)
    if why_not is not None:
        return why_not
    assert event.top is not None
    node = event.top.node
    if not any(fnmatch.fnmatchcase(node, pattern) for pattern in policy.allow):
        return f"{node} is not in the allow-list"
    part = f"{event.top.component} {event.top.index}".strip()
    if policy.scheduler == "slurm":
        reason = f"reflex {event.event_id}: {part}: {event.summary}"[:REASON_CHARS]
        return [
            Action(
                event.event_id,
                node,
                ("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"),
                ("scontrol", "update", f"nodename={node}", "state=resume"),
            )
        ]
    taint = f"{TAINT_KEY}={event.event_id}:NoSchedule"
    return [
        Action(event.event_id, node, ("kubectl", "cordon", node), ("kubectl", "uncordon", node)),
        Action(
            event.event_id,
            node,
            ("kubectl", "taint", "nodes", node, taint, "--overwrite"),
            ("kubectl", "taint", "nodes", node, f"{TAINT_KEY}:NoSchedule-"),
        ),
    ]


Runner = Callable[[tuple[str, ...]], None]  # runs a command line; raises when it fails


def run_command(argv: tuple[str, ...]) -> None:
    subprocess.run(argv, check=True, timeout=60, capture_output=True, text=True)


class Remediator:
    """Acts on events through ``runner`` (None: dry run, nothing runs), logging every action
    to ``log_path`` first. An event already in the log is not acted on again."""

    def __init__(
        self,
        policy: Policy,
        log_path: Path,
        runner: Runner | None = None,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if policy.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler {policy.scheduler!r}: expected one of {SCHEDULERS}")
        self.policy, self.log_path, self.runner = policy, log_path, runner
        self.say, self.clock = say, clock
        past = [entry for entry in self.entries() if entry["applied"]]
        self.done_events = {entry["event_id"] for entry in past}
        acted = {(e["event_id"], e["node"]) for e in past if e["step"] == "act"}
        undone = {(e["event_id"], e["node"]) for e in past if e["step"] == "undo"}
        self.nodes = {node for _, node in acted - undone}  # drained or cordoned by us now

    def handle(self, events: Iterable[LocalizationEvent]) -> list[Action]:
        taken: list[Action] = []
        for event in events:
            if event.event_id in self.done_events:
                continue
            actions = plan(event, self.policy)
            if isinstance(actions, str):
                log.info("remediation: event %s: nothing to do (%s)", event.event_id, actions)
                continue
            node = actions[0].node
            if node not in self.nodes and len(self.nodes) >= self.policy.max_nodes:
                self.say(
                    f"# {event.event_id}: not acting on {node}: {len(self.nodes)} nodes already "
                    f"(max {self.policy.max_nodes}); many at once is no one node's fault"
                )
                continue
            for action in actions:
                self._do(action, action.argv, "act")
            self.done_events.add(event.event_id)
            self.nodes.add(node)
            taken += actions
        return taken

    def undo(self, event_id: str) -> list[Action]:
        """Reverses the applied actions of one event, last first."""
        entries = [e for e in self.entries() if e["event_id"] == event_id and e["applied"]]
        actions = [Action(e["event_id"], e["node"], tuple(e["argv"]), tuple(e["undo_argv"]))
                   for e in entries if e["step"] == "act"]  # fmt: skip
        for action in reversed(actions):
            self._do(action, action.undo_argv, "undo")
            self.nodes.discard(action.node)
        return actions

    def entries(self) -> list[dict]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def _do(self, action: Action, argv: tuple[str, ...], step: str) -> None:
        applied = self.runner is not None
        self.say(("" if applied else "# dry run: ") + shlex.join(argv))
        entry = {**asdict(action), "step": step, "applied": applied, "time": self.clock()}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as handle:  # before it runs: a crash leaves the record
            handle.write(json.dumps(entry, sort_keys=True) + "\n")
        if self.runner is not None:
            try:
                self.runner(argv)
            except (OSError, subprocess.SubprocessError) as error:
                log.error("remediation: %s failed: %s", shlex.join(argv), error)
                raise
