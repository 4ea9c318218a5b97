"""What a flow keeps of jobs that ended: a fleet where jobs come and go, as on a research
cluster, run through `reflex flow` with its recovery store. Prints the jobs' state in the last
snapshot (what a restart loads), split into ended and running jobs, and the flow's peak RSS.

    .venv/bin/python benchmarks/job_churn.py [--lanes 4] [--nodes-per-job 8] [--job-s 600]
        [--hours 2]

To compare two trees, run it under each with PYTHONPATH set to the tree.
"""

from __future__ import annotations

import argparse
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.recovery_keys import JOB_STEP, latest_snapshots
from reflex_localize.simulator import Simulation
from reflex_localize.simulator.scenario import parse_scenario


def churn_scenario(lanes: int, nodes_per_job: int, job_s: float, hours: float) -> dict:
    """``lanes`` groups of nodes, each running jobs back to back for ``hours``."""
    duration = hours * 3600
    jobs = []
    for lane in range(lanes):
        names = [f"node-{lane * nodes_per_job + i + 1:04d}" for i in range(nodes_per_job)]
        start, number = 0.0, 0
        while start < duration:
            end = min(start + job_s, duration)
            jobs.append(
                {
                    "name": f"lane{lane}-job{number}",
                    "nodes": nodes_per_job,
                    "step_s": 2.0,
                    "start_s": start,
                    "end_s": end,
                    "nodes_list": names,
                }
            )
            start, number = end + 20.0, number + 1  # the scheduler's gap between jobs
    nodes = lanes * nodes_per_job
    return {
        "duration_s": duration,
        "cluster": {"nodes": nodes, "profiles": {"h100-sxm5-80gb": nodes}},
        "job": jobs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--nodes-per-job", type=int, default=8)
    parser.add_argument("--job-s", type=float, default=600.0)
    parser.add_argument("--hours", type=float, default=2.0)
    args = parser.parse_args()
    raw = churn_scenario(args.lanes, args.nodes_per_job, args.job_s, args.hours)
    scenario = parse_scenario(raw, default_name="job_churn")
    with tempfile.TemporaryDirectory() as scratch:
        capture, out = Path(scratch) / "capture.lp", Path(scratch) / "flow"
        with open(capture, "w") as lines:
            for chunk in Simulation(scenario, seed=7).chunks(10.0):
                lines.writelines(line + "\n" for frame in chunk for line in encode_frame(frame))
        started = time.monotonic()
        command = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()"]
        command += ["flow", "--source", f"file:{capture}", "--sink", "files", "--out", str(out)]
        subprocess.run(command, check=True, capture_output=True)
        wall = time.monotonic() - started
        blobs = latest_snapshots(out / "recovery", JOB_STEP)
    sizes = {key: len(blob) for key, blob in blobs.items()}
    states = {key: pickle.loads(blob) for key, blob in blobs.items()}
    ended = [key for key, state in states.items() if state.finished]
    running = [key for key in states if key not in ended]
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"jobs={len(raw['job'])} ended={len(ended)} running={len(running)} "
        f"ended_state_bytes={sum(sizes[k] for k in ended)} "
        f"running_state_bytes={sum(sizes[k] for k in running)} "
        f"bytes_per_ended_job={sum(sizes[k] for k in ended) / max(1, len(ended)):.0f} "
        f"flow_peak_rss_mib={peak_mib:.0f} wall_s={wall:.0f}"
    )


if __name__ == "__main__":
    main()
