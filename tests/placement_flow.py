"""A flow that reports where Bytewax runs each shard's source partition and its shard-step
state, keyed as the localization flow keys them (tests/test_shard_keys.py runs it)."""

from __future__ import annotations

import os

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from reflex_localize.flows.io.shard_keys import shard_key
from reflex_localize.flows.io.sources import shard_names

SHARDS = int(os.environ.get("PLACEMENT_SHARDS", "4"))


class _Once(StatefulSourcePartition[str, None]):
    def __init__(self, shard: str) -> None:
        self.shard, self.done = shard, False

    def next_batch(self) -> list[str]:
        if self.done:
            raise StopIteration
        self.done = True
        print(f"source {self.shard} {os.getpid()}", flush=True)
        return [self.shard]

    def snapshot(self) -> None:
        return None


class _Shards(FixedPartitionedSource[str, None]):
    def list_parts(self) -> list[str]:
        return shard_names(SHARDS)

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _Once:
        return _Once(for_part)


def _state(state: None, shard: str) -> tuple[None, None]:
    print(f"state {shard} {os.getpid()}", flush=True)
    return None, None


flow = Dataflow("placement")
keyed = op.key_on("key", op.input("in", flow, _Shards()), lambda s: shard_key(s, SHARDS))
op.inspect("done", op.stateful_map("state", keyed, _state), lambda *_: None)
