"""Reflex against an independent test bed: fleets and faults written from public operator
reports, not from Reflex's simulator (testbed/README.md).

For each fleet and seed: generate line protocol + labels, run ``reflex flow --source file:``
with the files sink, score the events, delete the capture (``--keep`` keeps it). Prints a
table per run and in total: hardware-blaming false events per 1,000 benign node-hours (by
trigger and by benign condition), strict precision, faults named first within 300 s / 900 s,
and the misses.

    .venv/bin/python benchmarks/independent_testbed.py            # full: 3 fleets x 2 seeds
    .venv/bin/python benchmarks/independent_testbed.py --quick    # ~2 minute smoke
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.generate import generate
from testbed.score import DETECT_WITHIN_S, RunScore, export_code, run_flow, score

FLEETS = ("hgx_ndr", "aisle_hdr", "site_roce")


def _row(name: str, runs: list[RunScore]) -> list[str]:
    nh = sum(r.node_hours for r in runs)
    bnh = sum(r.benign_node_hours for r in runs)
    faults = sum(r.faults for r in runs)
    blaming = sum(r.blaming for r in runs)
    false = sum(r.false for r in runs)
    strict = sum(r.strict for r in runs)
    node_only = sum(r.node_only for r in runs)
    named = [sum(r.named[n] for r in runs) for n in DETECT_WITHIN_S]
    named_node = sum(r.named_node[DETECT_WITHIN_S[-1]] for r in runs)
    rate = 1000.0 * false / bnh if bnh else 0.0
    prec = f"{strict}/{blaming} = {strict / blaming:.2f}" if blaming else "-"
    return [name, f"{nh:.0f}", f"{bnh:.0f}", str(faults), str(blaming), str(false), str(node_only),
            f"{rate:.1f}", prec, *(f"{k}/{faults}" for k in named),
            f"{named_node}/{faults}"]  # fmt: skip


HEADER = ["fleet", "node-h", "benign node-h", "faults", "hw events", "false", "node only",
          "false/1k bnh",
          "strict precision", *(f"named ≤{n:.0f}s" for n in DETECT_WITHIN_S),
          f"node ≤{DETECT_WITHIN_S[-1]:.0f}s"]  # fmt: skip


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [HEADER, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small fleets, short runs, 1 seed")
    parser.add_argument("--fleets", default=",".join(FLEETS))
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--hours", type=float, default=None, help="override every fleet's hours")
    parser.add_argument("--nodes", type=int, default=None, help="override every fleet's size")
    parser.add_argument("--out", type=Path, default=Path("/tmp/reflex-testbed"))
    parser.add_argument("--keep", action="store_true", help="keep the line-protocol captures")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="replay the captures and labels a --keep run left in --out instead of generating "
        "them again (the same fleets, seeds, hours and nodes)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the scores here")
    parser.add_argument(
        "--at",
        default="HEAD",
        help="Reflex commit to test (exported with git archive, so that others' edits during "
        "the run change nothing); 'worktree' for the files as they are",
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    hours, nodes = args.hours, args.nodes
    if args.quick:
        seeds, hours, nodes = seeds[:1], hours or 0.35, nodes or 12
    runs: list[RunScore] = []
    began = time.monotonic()
    code, commit = (
        (None, "working tree") if args.at == "worktree" else export_code(args.at, args.out)
    )
    print(f"Reflex under test: {commit}", flush=True)
    for fleet in args.fleets.split(","):
        for seed in seeds:
            t0 = time.monotonic()
            lp_path = args.out / f"{fleet}-{seed}.lp"
            label_path = args.out / f"{fleet}-{seed}.labels.json"
            if args.reuse and lp_path.exists() and label_path.exists():
                labels = json.loads(label_path.read_text())
            else:
                lp_path, _, labels = generate(fleet, seed, args.out, hours, nodes)
            gen_s = time.monotonic() - t0
            out_dir = args.out / f"{fleet}-{seed}.flow"
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True)
            lines = sum(1 for _ in lp_path.open())
            flow_s = run_flow(lp_path, out_dir, code)
            result = score(labels, out_dir)
            result.flow_seconds = flow_s
            runs.append(result)
            if not (args.keep or args.reuse):
                lp_path.unlink()
            print(
                f"{fleet} seed {seed}: {lines:,} lines, generated in {gen_s:.0f} s, flow "
                f"{flow_s:.0f} s; {result.events} events, {result.blaming} blame hardware, "
                f"{result.false} false; rejects {dict(result.rejects) or 0}",
                flush=True,
            )
    rows = [_row(f"{r.fleet}-{r.seed}", [r]) for r in runs]
    for fleet in args.fleets.split(","):
        rows.append(_row(f"{fleet} (all seeds)", [r for r in runs if r.fleet == fleet]))
    rows.append(_row("TOTAL", runs))
    print()
    print(f"MISSES (not named, right node and part, within {DETECT_WITHIN_S[-1]:.0f} s):")
    for r in runs:
        for miss in r.misses:
            print(f"  {miss}")
    print()
    print(_table(rows))
    by_trigger: Counter = Counter()
    by_condition: Counter = Counter()
    for r in runs:
        by_trigger.update(r.false_by_trigger)
        by_condition.update(r.false_by_condition)
    print()
    print(f"false events by trigger: {dict(by_trigger.most_common()) or 'none'}")
    print(f"false events blaming a switch or rack (not a node): {sum(r.false_site for r in runs)}")
    print(
        f"false events by the most specific benign condition on the blamed node: "
        f"{dict(by_condition.most_common()) or 'none'}"
    )
    print()
    print("false events:")
    for r in runs:
        for line in r.false_list:
            print(f"  {line}")
    print()
    print("detections (latency of the first strictly correct event):")
    for r in runs:
        for d in r.detections:
            lat = "-" if d["latency_s"] is None else f"{d['latency_s']:.0f} s"
            node = "-" if d["node_latency_s"] is None else f"{d['node_latency_s']:.0f} s"
            print(
                f"  {r.fleet}-{r.seed} {d['kind']:<20} {d['node']:<16} {d['part']:<14} "
                f"part+node {lat:>7}  node {node:>7}"
            )
    print(f"\nwall {time.monotonic() - began:.0f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        **r.__dict__,
                        "false_by_trigger": dict(r.false_by_trigger),
                        "false_by_condition": dict(r.false_by_condition),
                        "rejects": dict(r.rejects),
                    }
                    for r in runs
                ],
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
