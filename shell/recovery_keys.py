"""Which shard-state keys a recovery directory holds, so a flow never starts with keys that
would leave the saved shard states (baselines, node records) behind.

Reflex keys the shard step's states so that Bytewax keeps each on the worker that reads its
shard (:mod:`reflex_localize.flows.io.shard_keys`). A recovery directory written before then
holds them under the shards' bare names; a flow keyed the new way would start every shard
afresh and silently drop those records. ``reflex flow`` reads the directory's Bytewax
partitions (SQLite) before it starts and refuses such a directory unless told
``--shard-keys names``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SHARD_STEP = "reflex-localize.shard_step.stateful_batch"


def name_keyed_shards(directory: Path) -> list[str]:
    """The shard states in ``directory`` saved under a bare shard name (sorted)."""
    found: set[str] = set()
    for part in sorted(directory.glob("part-*.sqlite3")):
        with sqlite3.connect(f"file:{part}?mode=ro", uri=True) as connection:
            rows = connection.execute(
                "SELECT DISTINCT state_key FROM snaps WHERE step_id = ?", (SHARD_STEP,)
            ).fetchall()
        found.update(key for (key,) in rows if "~" not in key)
    return sorted(found)


def keys_problem(directory: Path, scheme: str) -> str | None:
    """Why ``scheme`` would leave ``directory``'s shard states behind, or None."""
    named = name_keyed_shards(directory) if directory.is_dir() else []
    if scheme == "placed" and named:
        return (
            f"{directory} holds shard states under their bare names ({', '.join(named)}), "
            "written before Reflex placed each shard's state on the worker that reads it. "
            "Run with --shard-keys names to keep them (node records, baselines), or start a "
            "new recovery directory (they are then relearned)."
        )
    return None


JOB_STEP = "reflex-localize.job_step.stateful_batch"


def latest_snapshots(directory: Path, step_id: str) -> dict[str, bytes]:
    """Each key's latest saved state of one step, pickled, as a resume would load it (a key
    whose state was discarded is left out)."""
    latest: dict[str, tuple[int, bytes | None]] = {}
    for part in sorted(directory.glob("part-*.sqlite3")):
        with sqlite3.connect(f"file:{part}?mode=ro", uri=True) as connection:
            rows = connection.execute(
                "SELECT state_key, snap_epoch, ser_change FROM snaps WHERE step_id = ?",
                (step_id,),
            ).fetchall()
        for key, epoch, blob in rows:
            if epoch >= latest.get(key, (-1, None))[0]:
                latest[key] = (epoch, blob)
    return {key: blob for key, (_, blob) in latest.items() if blob is not None}
