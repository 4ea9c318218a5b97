"""Writes the Grafana dashboards and the InfluxDB template from the code that builds them.

- ``dashboards/grafana/*.json``: provisioned form (datasource uid ``reflex-influxdb``);
- ``dashboards/grafana_export/*.json``: the same boards for a UI import, which asks for the
  datasource (``__inputs``); kept out of ``grafana/``, which provisioning loads whole;
- ``influx/template/reflex.json``: the InfluxDB template with default settings.

``python -m reflex_localize.dashboards.generate`` rewrites them; ``--check`` fails when a
checked-in file differs from what the code builds, so they are reviewed like any golden output.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from reflex_localize.dashboards import errors, fleet, job, node
from reflex_localize.dashboards.grafana_export import exported
from reflex_localize.dashboards.grafana_model import Json
from reflex_localize.dashboards.template import TEMPLATE_FILE, default_template

GRAFANA_DIR = Path(__file__).parent / "grafana"
EXPORT_DIR = Path(__file__).parent / "grafana_export"
BUILDERS: dict[str, Callable[[], Json]] = {
    "fleet-overview": fleet.build,
    "job-view": job.build,
    "node-drilldown": node.build,
    "gpu-nic-errors": errors.build,
}


def render(builder: Callable[[], Json]) -> str:
    return _dump(builder())


def _dump(board: Json) -> str:
    return json.dumps(board, indent=2, sort_keys=True) + "\n"


def generated_files(
    directory: Path = GRAFANA_DIR, export_dir: Path = EXPORT_DIR
) -> dict[Path, str]:
    """Every generated file and the text it must hold."""
    out: dict[Path, str] = {}
    for name, builder in BUILDERS.items():
        board = builder()
        out[directory / f"{name}.json"] = _dump(board)
        out[export_dir / f"{name}.json"] = _dump(exported(board))
    out[TEMPLATE_FILE] = default_template()
    return out


def stale_files(directory: Path = GRAFANA_DIR, export_dir: Path = EXPORT_DIR) -> list[str]:
    """Names of generated files that are missing or differ from what the code builds."""
    return [
        str(path)
        for path, text in generated_files(directory, export_dir).items()
        if not path.exists() or path.read_text() != text
    ]


def write_all(directory: Path = GRAFANA_DIR, export_dir: Path = EXPORT_DIR) -> None:
    for path, text in generated_files(directory, export_dir).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_files()
        for name in stale:
            print(f"{name} is stale: run python -m reflex_localize.dashboards.generate")
        return 1 if stale else 0
    write_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
