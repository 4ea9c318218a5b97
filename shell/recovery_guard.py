"""A recovery directory resumes only the flow that wrote it: checked before any process starts.

A resume takes the saved cursors and states as they are. Under another ``--window`` the saved
window numbers mean other times (a restart with 5 over a directory of 10 re-read everything and
emitted the same XID twice); under other ``--shards`` the saved partitions are not the sources'
(Bytewax panicked in 74 lines); under another ``--cluster`` one cluster's baselines would judge
another's nodes. So ``reflex flow`` keeps its parameters beside the state
(``reflex-flow.json``), compares them at every start, and refuses a change in one line. It
also opens each partition read-only first: a corrupt one is named, not a panic.

>>> import tempfile
>>> directory = Path(tempfile.mkdtemp())
>>> remember_parameters(directory, {"window": 10.0, "shards": 4, "cluster": "c1"})
>>> recovery_problem(directory, {"window": 10.0, "shards": 4, "cluster": "c1"}) is None
True
>>> recovery_problem(directory, {"window": 5.0, "shards": 4, "cluster": "c1"}).split(": ")[0]
'... made by a flow with --window 10.0 (now 5.0)'

"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

PARAMETERS_FILE = "reflex-flow.json"
Parameters = dict[str, str | int | float]
_TABLES = {"parts", "exs", "fronts", "commits", "snaps"}  # what bytewax.recovery creates


def recovery_problem(directory: Path, parameters: Parameters) -> str | None:
    """Why the flow of ``parameters`` (option name without dashes -> value) cannot resume
    from ``directory``, in one line; None when it can (or the directory is new)."""
    for part in sorted(directory.glob("part-*.sqlite3")):
        problem = _part_problem(part)
        if problem is not None:
            return (
                f"{part} is not a recovery partition Reflex can resume from ({problem}); "
                "move the recovery directory away to start afresh (baselines are relearned)"
            )
    saved = _saved(directory)
    if isinstance(saved, str):
        return saved
    changed = [
        f"--{name} {saved[name]} (now {value})"
        for name, value in parameters.items()
        if name in saved and saved[name] != value
    ]
    if not changed:
        return None
    return (
        f"{directory} was made by a flow with {', '.join(changed)}: it cannot resume under "
        "other options; run with the same ones, or give a new --recovery-dir"
    )


def saved_parameter(directory: Path, name: str) -> str | int | float | None:
    """The value ``name`` was saved with in ``directory``; None when none is (or the saved
    options cannot be read: :func:`recovery_problem` says why)."""
    saved = _saved(directory)
    return None if isinstance(saved, str) else saved.get(name)


def remember_parameters(directory: Path, parameters: Parameters) -> None:
    """Writes ``parameters`` beside the state, once: a directory keeps its first flow's."""
    path = directory / PARAMETERS_FILE
    if path.exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(parameters, sort_keys=True) + "\n")
    os.replace(temporary, path)  # whole or absent, even if this process dies here


def _saved(directory: Path) -> Parameters | str:
    """The parameters saved in ``directory`` (empty when none), or why they cannot be read."""
    path = directory / PARAMETERS_FILE
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        return f"{path}: cannot read the flow's saved options ({error})"
    if not isinstance(saved, dict):
        return f"{path}: the flow's saved options are not a JSON object"
    return saved


def _part_problem(part: Path) -> str | None:
    try:
        connection = sqlite3.connect(f"file:{part}?mode=ro", uri=True)
    except sqlite3.Error as error:
        return str(error)
    try:
        (check,) = connection.execute("PRAGMA quick_check(1)").fetchone()
        if check != "ok":
            return f"SQLite finds it damaged: {check}"
        tables = {name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}  # fmt: skip
        if missing := _TABLES - tables:
            return f"it lacks the tables {', '.join(sorted(missing))}"
        connection.execute("SELECT count(*) FROM snaps").fetchone()
    except sqlite3.Error as error:
        return str(error)
    finally:
        connection.close()
    return None
