"""In a real multi-process Bytewax run, each shard's state (the shard step) lives in the process
that runs its source partition, and the shards spread over the processes: a shard's windows
are never pickled to another process, and a second process takes half the shard steps. This
checks Bytewax's placement itself (flows/io/shard_keys.py), so an upgrade that routes otherwise
is caught here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reflex_localize.flows.io.shard_keys import route, shard_key
from reflex_localize.influx.local_server import free_port

pytestmark = pytest.mark.slow
TESTS = Path(__file__).parent


def placements(processes: int, shards: int) -> dict[str, dict[str, int]]:
    """``{"source": shard -> pid, "state": shard -> pid}`` from a run of ``processes``."""
    addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(processes))
    env = {**os.environ, "PLACEMENT_SHARDS": str(shards), "PYTHONPATH": str(TESTS)}
    command = [sys.executable, "-m", "bytewax.run", "placement_flow:flow", "-a", addresses]
    runs = [
        subprocess.Popen([*command, "-i", str(i)], env=env, stdout=subprocess.PIPE, text=True)
        for i in range(processes)
    ]
    found: dict[str, dict[str, int]] = {"source": {}, "state": {}}
    for run in runs:
        out, _ = run.communicate(timeout=60)
        assert run.returncode == 0
        for line in out.splitlines():
            words = line.split()  # Bytewax's own lines (connection retries) are not ours
            if len(words) == 3 and words[0] in found:
                found[words[0]][words[1]] = int(words[2])
    return found


@pytest.mark.parametrize(("processes", "shards"), [(2, 4), (3, 12)])
def test_each_shard_state_lives_with_its_source(processes: int, shards: int) -> None:
    found = placements(processes, shards)
    assert len(found["source"]) == shards
    assert found["state"] == found["source"]
    assert len(set(found["state"].values())) == processes  # every process takes shards


def test_the_keys_do_not_depend_on_the_worker_count() -> None:
    names = [f"shard-{i}" for i in range(12)]
    in_order = sorted(names)
    for workers in (1, 2, 3, 4, 6, 8, 16):
        assert [route(shard_key(n, 12), workers) for n in names] == [
            in_order.index(n) % workers for n in names
        ]


def test_a_shard_keyed_by_its_name_alone_would_cross() -> None:
    """What the keys fix: Bytewax would put all four default shards' states on one of two
    workers, two of them away from their sources."""
    assert {route(f"shard-{i}", 2) for i in range(4)} == {1}


def test_the_keys_stay_what_recovery_directories_hold() -> None:
    """Shard states are stored under these keys: a search that found others (a faster one, say)
    would lose every baseline of a flow restarted from its recovery directory."""
    assert [shard_key(f"shard-{i}", 4) for i in range(4)] == [
        "shard-0~002127", "shard-1~000597", "shard-2~000707", "shard-3~001972",
    ]  # fmt: skip
    assert [shard_key(f"shard-{i}", 16) for i in (0, 7, 15)] == [
        "shard-0~002127", "shard-7~005170", "shard-15~000630",
    ]  # fmt: skip
