"""``reflex remediate``: a confirmed hardware verdict drains its node in Slurm or cordons and
taints it in Kubernetes, dry run first, through an allow-list, every action logged with its
undo; anything less than a confirmed verdict is left alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from reflex_localize.flows.incidents.events import LocalizationEvent, Suspect
from reflex_localize.shell.cli import main
from reflex_localize.shell.remediation import Policy, Remediator


def verdict(
    event_id: str = "023e0d1edfbce5f7",
    node: str = "gpu-node-0006",
    severity: str = "critical",
    confidence: float = 0.93,
    component: str = "gpu",
) -> LocalizationEvent:
    suspects = [Suspect(node, component, "3", 7.5)] if component else []
    return LocalizationEvent(event_id, 1_767_225_900 * 10**9, "prod-a", "4242", "explicit",
                             severity, confidence, suspects, "drain node; reset the GPU",
                             "XID 79 (GPU has fallen off the bus) on GPU 3")  # fmt: skip


def events_file(path: Path, *events: LocalizationEvent) -> Path:
    path.write_text("".join(event.to_json() + "\n" for event in events))
    return path


def remediate(*args: str) -> str:
    result = CliRunner().invoke(main, ["remediate", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_dry_run_prints_the_exact_slurm_command(tmp_path: Path) -> None:
    events = events_file(tmp_path / "events.jsonl", verdict())
    log = tmp_path / "actions.jsonl"
    said = remediate("--events", str(events), "--scheduler", "slurm", "--allow", "gpu-node-*",
                     "--log", str(log))  # fmt: skip
    assert said.splitlines() == [
        "# dry run: scontrol update nodename=gpu-node-0006 state=drain "
        "'reason=reflex 023e0d1edfbce5f7: gpu 3: XID 79 (GPU has fallen off the bus) on GPU 3'"
    ]
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["applied"] is False
    assert entry["undo_argv"] == ["scontrol", "update", "nodename=gpu-node-0006", "state=resume"]


def test_a_dry_run_prints_the_exact_kubernetes_calls(tmp_path: Path) -> None:
    events = events_file(tmp_path / "events.jsonl", verdict())
    said = remediate("--events", str(events), "--scheduler", "kubernetes", "--allow", "gpu-*",
                     "--log", str(tmp_path / "actions.jsonl"))  # fmt: skip
    assert said.splitlines() == [
        "# dry run: kubectl cordon gpu-node-0006",
        "# dry run: kubectl taint nodes gpu-node-0006 "
        "reflex.io/hardware-suspect=023e0d1edfbce5f7:NoSchedule --overwrite",
    ]


@pytest.mark.parametrize(
    "event",
    [
        verdict(severity="warning"),
        verdict(confidence=0.5),
        verdict(component=""),  # no hardware fault (pipeline imbalance)
        verdict(node="login-1"),  # not in the allow-list
    ],
    ids=["warning", "unsure", "no-hardware", "not-allowed"],
)
def test_only_a_confirmed_verdict_on_an_allowed_node_is_acted_on(
    event: LocalizationEvent, tmp_path: Path
) -> None:
    done: list[tuple[str, ...]] = []
    remediator = Remediator(Policy("slurm", ("gpu-*",)), tmp_path / "log", done.append,
                            say=lambda text: None)  # fmt: skip
    assert remediator.handle([event]) == [] and done == []


def test_no_allow_list_acts_on_no_node(tmp_path: Path) -> None:
    events = events_file(tmp_path / "events.jsonl", verdict())
    said = remediate("--events", str(events), "--scheduler", "slurm", "--log",
                     str(tmp_path / "log"))  # fmt: skip
    assert "scontrol" not in said


def test_applied_actions_are_logged_once_bounded_and_undone(tmp_path: Path) -> None:
    log, done = tmp_path / "actions.jsonl", list[tuple[str, ...]]()
    policy = Policy("kubernetes", ("gpu-*",), max_nodes=2)
    first = Remediator(policy, log, done.append, say=lambda text: None)
    first.handle([verdict("e1", "gpu-1"), verdict("e2", "gpu-2"), verdict("e3", "gpu-3")])
    assert [argv[1] for argv in done] == ["cordon", "taint", "cordon", "taint"]  # not gpu-3
    # A restart reads the log: e1 is not acted on again, and the bound still holds.
    again = Remediator(policy, log, done.append, say=lambda text: None)
    assert again.handle([verdict("e1", "gpu-1"), verdict("e4", "gpu-4")]) == []
    undone = again.undo("e1")
    assert done[4:] == [
        ("kubectl", "taint", "nodes", "gpu-1", "reflex.io/hardware-suspect:NoSchedule-"),
        ("kubectl", "uncordon", "gpu-1"),
    ]
    assert len(undone) == 2
    assert [a.node for a in again.handle([verdict("e4", "gpu-4")])] == ["gpu-4", "gpu-4"]


def test_apply_runs_scontrol_and_undo_resumes_the_node(tmp_path: Path) -> None:
    """A stand-in scontrol on PATH records its arguments: the real subprocess path."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n')
    scontrol.chmod(0o755)
    events = events_file(tmp_path / "events.jsonl", verdict())
    log = tmp_path / "actions.jsonl"
    common = ["--scheduler", "slurm", "--allow", "gpu-node-*", "--log", str(log), "--apply"]
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    runner = CliRunner(env={"PATH": path})
    result = runner.invoke(main, ["remediate", "--events", str(events), *common])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["remediate", "--undo", "023e0d1edfbce5f7", *common])
    assert result.exit_code == 0, result.output
    assert calls.read_text().splitlines() == [
        "update|nodename=gpu-node-0006|state=drain|reason=reflex 023e0d1edfbce5f7: gpu 3: "
        "XID 79 (GPU has fallen off the bus) on GPU 3|",
        "update|nodename=gpu-node-0006|state=resume|",
    ]
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines()]
    assert steps == ["act", "undo"]
