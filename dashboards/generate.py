"""Writes the Grafana dashboards to ``dashboards/grafana/*.json``.

``python -m dashboards.generate`` rewrites them; ``--check`` fails when a checked-in file
differs from what the code builds, so the JSON is reviewed like any golden output.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from reflex_localize.dashboards import errors, fleet, job, node
from reflex_localize.dashboards.grafana_model import Json

GRAFANA_DIR = Path(__file__).parent / "grafana"
BUILDERS: dict[str, Callable[[], Json]] = {
    "fleet-overview": fleet.build,
    "job-view": job.build,
    "node-drilldown": node.build,
    "gpu-nic-errors": errors.build,
}


def render(builder: Callable[[], Json]) -> str:
    return json.dumps(builder(), indent=2, sort_keys=True) + "\n"


def stale_files(directory: Path = GRAFANA_DIR) -> list[str]:
    """Names of dashboards whose file is missing or differs from the generated JSON."""
    return [
        name
        for name, builder in BUILDERS.items()
        if not (directory / f"{name}.json").exists()
        or (directory / f"{name}.json").read_text() != render(builder)
    ]


def write_all(directory: Path = GRAFANA_DIR) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, builder in BUILDERS.items():
        (directory / f"{name}.json").write_text(render(builder))


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_files()
        for name in stale:
            print(f"dashboards/grafana/{name}.json is stale: run python -m dashboards.generate")
        return 1 if stale else 0
    write_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
