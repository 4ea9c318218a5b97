"""Runs ``reflex flow`` over a generated fleet and scores its events against the labels.

Rules (also in testbed/README.md):

- An event *blames hardware* when its top suspect (``suspects[0]``) names a node and its
  action does not begin with "no hardware". ``step_pattern``-style verdicts with no suspect
  never blame hardware.
- A blaming event *matches* a fault when its top suspect's node is the fault's node and its
  time is within [start - grace_before, end + grace_after]; it is *strictly correct* when the
  top suspect's part is also one of the fault's right parts.
- A blaming event that matches no fault is *false*. It is attributed to the most specific
  benign condition labelled on its node at its time (or "none"); a suspect that is a switch
  or rack (its site tag) covers the nodes under it.
- A fault is *named first* within N s when a strictly correct event comes no later than
  start + N (and no earlier than start - grace_before).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DETECT_WITHIN_S = (300.0, 900.0)


@dataclass
class RunScore:
    fleet: str
    seed: int
    node_hours: float
    benign_node_hours: float
    faults: int
    events: int = 0
    blaming: int = 0
    false: int = 0
    false_site: int = 0  # of them, blaming a switch or rack rather than a node
    strict: int = 0
    node_only: int = 0
    false_by_trigger: Counter = field(default_factory=Counter)
    false_by_condition: Counter = field(default_factory=Counter)
    named: dict[float, int] = field(default_factory=dict)
    named_node: dict[float, int] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)
    false_list: list[str] = field(default_factory=list)
    detections: list[dict[str, Any]] = field(default_factory=list)
    rejects: Counter = field(default_factory=Counter)
    flow_seconds: float = 0.0


def export_code(rev: str, into: Path) -> tuple[Path, str]:
    """Reflex's tree at ``rev`` (``git archive``) in a folder of ``into``, so that edits others
    make to the working tree during a run do not change the code under test; returns the
    folder and the full commit id."""
    repo = Path(__file__).resolve().parents[1]
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", rev], check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    folder = into / f"reflex-{sha[:12]}"
    if not (folder / "reflex_localize").exists():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(repo), "archive", sha], check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder, sha


def run_flow(lp_path: Path, out_dir: Path, code: Path | None = None) -> float:
    """``reflex flow --source file:LP --sink files --out DIR``, with the package imported from
    ``code`` when given (an export of a commit); returns its wall seconds."""
    import time

    cmd = [sys.executable, "-m", "reflex_localize", "flow", "--source", f"file:{lp_path}",
           "--sink", "files", "--out", str(out_dir), "--no-recovery"]  # fmt: skip
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")]).rstrip(":")
    began = time.monotonic()
    with (out_dir.parent / f"{out_dir.name}.log").open("w") as log:
        # `reflex flow` starts `python -m bytewax.run` with an environment of its own (no
        # PYTHONPATH), and `-m` puts the working directory first on sys.path: running from the
        # export is what makes its worker import the exported code, not the editable install.
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=code)
    return time.monotonic() - began


def _events(out_dir: Path) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    path = out_dir / "events.jsonl"
    if not path.exists():
        return []
    for line in path.read_text().splitlines():
        if line.strip():
            event = json.loads(line)
            key = event.get("event_id") or line
            if key not in seen or event["time_ns"] < seen[key]["time_ns"]:
                seen[key] = event
    return sorted(seen.values(), key=lambda e: e["time_ns"])


def blames_hardware(event: dict[str, Any]) -> bool:
    suspects = event.get("suspects") or []
    if not suspects or not suspects[0].get("node"):
        return False
    return not str(event.get("action", "")).lower().startswith("no hardware")


def _part_right(suspect: dict[str, Any], parts: list[dict[str, str]]) -> bool:
    return any(
        suspect.get("component") == p["component"]
        and (p["index"] == "*" or str(suspect.get("index")) == p["index"])
        for p in parts
    )


def score(labels: dict[str, Any], out_dir: Path) -> RunScore:
    faults = labels["faults"]
    before, after = labels["grace_s"]["before"] * 1e9, labels["grace_s"]["after"] * 1e9
    start_ns = labels["start_ns"]
    result = RunScore(labels["fleet"], labels["seed"], labels["node_hours"],
                      labels["benign_node_hours"], len(faults))  # fmt: skip
    events = _events(out_dir)
    result.events = len(events)
    first_strict: dict[int, int] = {}
    first_node: dict[int, int] = {}
    for event in events:
        if not blames_hardware(event):
            continue
        result.blaming += 1
        top = event["suspects"][0]
        t = int(event["time_ns"])
        matched = False
        for i, f in enumerate(faults):
            if top["node"] != f["node"] or not f["start_ns"] - before <= t <= f["end_ns"] + after:
                continue
            matched = True
            first_node.setdefault(i, t)
            if _part_right(top, f["right"]["parts"]):
                first_strict.setdefault(i, t)
        if matched:
            if any(
                top["node"] == f["node"]
                and _part_right(top, f["right"]["parts"])
                and f["start_ns"] - before <= t <= f["end_ns"] + after
                for f in faults
            ):
                result.strict += 1
            else:
                result.node_only += 1
            continue
        result.false += 1
        result.false_by_trigger[event.get("trigger", "?")] += 1
        blamed = {top["node"]}
        if top["node"] not in labels["nodes"]:  # a switch or rack named by its site tag
            result.false_site += 1
            blamed = {n for n, tags in labels.get("sites", {}).items()
                      if top["node"] in tags.values()}  # fmt: skip
        covering = [b for b in labels["benign"] if blamed & set(b["nodes"])
                    and b["start_ns"] - before <= t <= b["end_ns"] + after
                    and b["kind"] != "diurnal_temperature"]  # fmt: skip
        # the most specific condition explains it: the fewest node-seconds
        covering.sort(key=lambda b: len(b["nodes"]) * (b["end_ns"] - b["start_ns"]))
        conditions = [b["kind"] for b in covering] or ["none"]
        result.false_by_condition[conditions[0]] += 1
        result.false_list.append(
            f"{labels['fleet']}-{labels['seed']} +{(t - start_ns) / 1e9:.0f}s "
            f"{event.get('trigger')}/{event.get('severity')}: {top['node']} {top['component']} "
            f"{top['index']} [{', '.join(conditions)}] {event.get('summary', '')[:110]}"
        )
    for n in DETECT_WITHIN_S:
        result.named[n] = sum(
            1
            for i, f in enumerate(faults)
            if i in first_strict and first_strict[i] <= f["start_ns"] + n * 1e9
        )
        result.named_node[n] = sum(
            1
            for i, f in enumerate(faults)
            if i in first_node and first_node[i] <= f["start_ns"] + n * 1e9
        )
    for i, f in enumerate(faults):
        latency = (first_strict[i] - f["start_ns"]) / 1e9 if i in first_strict else None
        node_latency = (first_node[i] - f["start_ns"]) / 1e9 if i in first_node else None
        result.detections.append({"kind": f["kind"], "node": f["node"], "part":
                                  f"{f['component']} {f['index']}", "latency_s": latency,
                                  "node_latency_s": node_latency})  # fmt: skip
        if latency is None or latency > DETECT_WITHIN_S[-1]:
            how = (
                "never named"
                if node_latency is None
                else f"node named after {node_latency:.0f} s, part never right"
            )
            if latency is not None:
                how = f"named after {latency:.0f} s"
            result.misses.append(
                f"{labels['fleet']}-{labels['seed']} {f['kind']} {f['node']} {f['component']} "
                f"{f['index']} at +{f['start_s']:.0f}s"
                f"{' (from job start)' if f['from_job_start'] else ''}: {how}"
            )  # fmt: skip
    errors = out_dir / "errors.jsonl"
    if errors.exists():
        for line in errors.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                result.rejects[f"{record.get('where')}:{record.get('reason')}"] += 1
    return result
