"""Installed size of each install of Reflex, each in a fresh venv.

Builds the wheel once (from a copy of the checkout, as ``tests/test_wheel.py`` does), then for
each install (the training hook alone, ``[agent]``, ``[flow]``, ``[all]``) creates a venv in a
temporary folder, installs it with pip, and reports ``du -s`` of the venv's site-packages
against an empty venv's (pip itself), the distributions pip brought, and whether the heavy
ones a GPU node must not carry (bytewax, scikit-learn, scipy, matplotlib) are among them. Each
install is then smoke-run: the hook imports, and ``reflex --help`` / a command's ``--help``
answers.

    .venv/bin/python benchmarks/install_sizes.py            # needs the package index (pip)
    .venv/bin/python benchmarks/install_sizes.py --keep /tmp/sizes
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache",
              "reflex-demo", "*.so")  # fmt: skip
HEAVY = ("bytewax", "scikit-learn", "scipy", "matplotlib")
# install name -> (extra, a command that must run in it)
INSTALLS = {
    "hook": ("", [["python", "-c", "import reflex_localize.collectors.training_hook"]]),
    "agent": ("[agent]", [["reflex", "collect", "--help"]]),
    "flow": ("[flow]", [["reflex", "flow", "--help"]]),
    "all": ("[all]", [["reflex", "fit", "--help"]]),
}


def build_wheel(work: Path) -> Path:
    source = work / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = work.glob("reflex_localize-*.whl")
    return wheel


def site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python3*/site-packages")
    return found


def du_kib(path: Path) -> int:
    out = subprocess.run(["du", "-s", "-k", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def fresh_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path / "bin"


def distributions(bin_dir: Path) -> list[str]:
    out = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(line.split("==")[0].lower() for line in out.stdout.splitlines() if line)


def measure(work: Path, wheel: Path, name: str, empty_kib: int, base: set[str]) -> dict:
    extra, smoke = INSTALLS[name]
    bin_dir = fresh_venv(work / f"venv-{name}")
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", f"{wheel}{extra}"],
        check=True,
        timeout=1200,
    )
    brought = [d for d in distributions(bin_dir) if d not in base]
    ran = []
    for command in smoke:
        program = str(bin_dir / command[0])
        result = subprocess.run([program, *command[1:]], capture_output=True, timeout=120)
        ran.append(f"{' '.join(command)}: exit {result.returncode}")
    kib = du_kib(site_packages(bin_dir.parent))
    return {
        "install": name,
        "site_packages_mib": kib / 1024,
        "added_mib": (kib - empty_kib) / 1024,
        "distributions": brought,
        "heavy": [h for h in HEAVY if h in brought],
        "smoke": ran,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work folder to keep (default: a temp folder)")
    parser.add_argument("--only", choices=sorted(INSTALLS), action="append")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="reflex-sizes-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        wheel = build_wheel(work)
        empty_bin = fresh_venv(work / "venv-empty")
        empty_kib = du_kib(site_packages(empty_bin.parent))
        base = set(distributions(empty_bin))
        print(f"wheel {wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB")
        print(f"empty venv site-packages (pip): {empty_kib / 1024:.1f} MiB")
        print(f"{'install':<7} {'added MiB':>9} {'total MiB':>9}  heavy  smoke / distributions")
        for name in args.only or list(INSTALLS):
            row = measure(work, wheel, name, empty_kib, base)
            print(
                f"{row['install']:<7} {row['added_mib']:9.1f} {row['site_packages_mib']:9.1f}  "
                f"{','.join(row['heavy']) or '-':<5}  {'; '.join(row['smoke'])}"
            )
            print(f"        {len(row['distributions'])}: {' '.join(row['distributions'])}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
