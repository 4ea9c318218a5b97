"""State keys for the shard step that Bytewax routes to the worker that reads the shard.

Bytewax 0.21 gives the partitions of a source to workers in turn, in the sorted order of
their names (the part at sorted position ``p`` goes to worker ``p mod W``), and routes a state
key to worker ``SipHash-1-3(key) mod W`` (Rust's ``DefaultHasher`` over a ``String``: its
bytes, then 0xff). Keyed by its own name, a shard's windows crossed to another process about
half the time, pickled whole, and the four default shards' states all hashed to one of two
workers, so a second process parallelised nothing.

A shard's state key is its name and the first suffix whose hash is the shard's sorted
position modulo ``SPREAD``: for every worker count that divides it (1 to 8, 10, 12, 16, 32, 64
and more) the state lives where its source partition runs, one shard per worker in turn. The
key does not depend on the worker count, so a restart with another number of processes
still finds every shard's state. ``tests/test_shard_keys.py`` checks the placement in a real
multi-process Bytewax run, so an upgrade of Bytewax that routes otherwise is caught.

A recovery directory written before these keys holds the shard states (baselines, node
records) under the shards' names: ``reflex flow`` refuses it unless told ``--shard-keys
names``, which keeps those keys (see :mod:`shell.recovery_keys`).

>>> shard_key("shard-1", 4) == shard_key("shard-1", 4)
True
>>> route(shard_key("shard-1", 4), 2), route(shard_key("shard-2", 4), 4)
(1, 2)
"""

from __future__ import annotations

from functools import cache

import numpy as np

SPREAD = 6720  # 2^6 * 3 * 5 * 7
SCHEMES = ("placed", "names")
# Suffixes tried in the first batch, each next batch twice as many: the first hit is about
# SPREAD suffixes in, so small batches first spare a process most of the hashing at start-up
# (four shards' keys took 51 ms in batches of 4 * SPREAD). The key is the first hit whatever
# the batches: suffixes are tried in order.
_FIRST_CANDIDATES = 2048
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def route(key: str, workers: int) -> int:
    """The worker Bytewax routes state ``key`` to among ``workers``."""
    return int(_siphash13(np.frombuffer(key.encode() + b"\xff", np.uint8)[None, :])[0]) % workers


def state_key(shard: str, n_shards: int, scheme: str = "placed") -> str:
    """The shard step's state key of ``shard``: placed (the default), or its bare name."""
    return shard if scheme == "names" else shard_key(shard, n_shards)


@cache
def shard_key(shard: str, n_shards: int) -> str:
    """The state key of partition ``shard`` of ``n_shards`` (see the module's docstring)."""
    names = sorted(f"shard-{i}" for i in range(n_shards))
    target = names.index(shard) % SPREAD
    first, count = 0, _FIRST_CANDIDATES
    while True:
        suffixes = [f"{shard}~{k:06d}" for k in range(first, first + count)]
        data = np.frombuffer("".join(s + "\xff" for s in suffixes).encode("latin-1"), np.uint8)
        hashes = _siphash13(data.reshape(len(suffixes), -1)) % np.uint64(SPREAD)
        hits = np.flatnonzero(hashes == np.uint64(target))
        if len(hits):
            return suffixes[int(hits[0])]
        first, count = first + count, 2 * count


def _siphash13(rows: np.ndarray) -> np.ndarray:
    """SipHash-1-3 with zero keys of each row of ``rows`` (uint8, all the same length)."""
    n = rows.shape[1]
    v0 = np.full(len(rows), 0x736F6D6570736575, np.uint64)
    v1 = np.full(len(rows), 0x646F72616E646F6D, np.uint64)
    v2 = np.full(len(rows), 0x6C7967656E657261, np.uint64)
    v3 = np.full(len(rows), 0x7465646279746573, np.uint64)
    state = [v0, v1, v2, v3]
    whole = n - n % 8
    words = rows[:, :whole].copy().view("<u8") if whole else np.zeros((len(rows), 0), np.uint64)
    tail = np.zeros((len(rows), 8), np.uint8)
    tail[:, : n % 8] = rows[:, whole:]
    last = tail.view("<u8")[:, 0] | np.uint64((n & 0xFF) << 56)
    with np.errstate(over="ignore"):
        for m in [*words.T, last]:
            state[3] ^= m
            _round(state)
            state[0] ^= m
        state[2] ^= np.uint64(0xFF)
        for _ in range(3):
            _round(state)
    return (state[0] ^ state[1] ^ state[2] ^ state[3]) & _MASK


def _rotl(x: np.ndarray, bits: int) -> np.ndarray:
    return (x << np.uint64(bits)) | (x >> np.uint64(64 - bits))


def _round(v: list[np.ndarray]) -> None:
    v[0] = v[0] + v[1]
    v[1] = _rotl(v[1], 13) ^ v[0]
    v[0] = _rotl(v[0], 32)
    v[2] = v[2] + v[3]
    v[3] = _rotl(v[3], 16) ^ v[2]
    v[0] = v[0] + v[3]
    v[3] = _rotl(v[3], 21) ^ v[0]
    v[2] = v[2] + v[1]
    v[1] = _rotl(v[1], 17) ^ v[2]
    v[2] = _rotl(v[2], 32)
