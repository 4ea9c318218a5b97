"""``entity_groups`` gives exactly what factorizing the per-row key strings gives (the
straightforward way, kept here as the reference): the same distinct keys in first-seen order
and the same codes, also when odd tags spell another entity's key."""

from __future__ import annotations

import random

import numpy as np
import pytest

from reflex_localize.flows.signals.derive import entity_groups, factorize
from reflex_localize.schemas.frame import Frame

TAGS = {
    "gpu": ("gpu",),
    "ib_port": ("hca", "port"),
    "nic": ("device",),
    "host_disk": ("device",),
    "host": (),
}
VALUES = ["n1", "n2", "n10", "0", "1", "mlx5_0", "a|gpu|1", "1|gpu|2", "2", "a", "nvme0n1"]


def _reference(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    node = frame.tags["node"].astype(object)
    tags = frame.tags
    if frame.measurement == "gpu":
        keys = node + "|gpu|" + tags["gpu"].astype(object)
    elif frame.measurement == "ib_port":
        keys = node + "|nic|" + tags["hca"].astype(object) + "/" + tags["port"]
    elif frame.measurement == "nic":
        keys = node + "|nic|" + tags["device"].astype(object)
    elif frame.measurement == "host_disk":
        keys = node + "|host|-#" + tags["device"].astype(object)
    else:
        keys = node + "|host|-"
    return factorize(keys)


@pytest.mark.parametrize("seed", range(40))
def test_entity_groups_match_the_key_strings(seed: int) -> None:
    rng = random.Random(seed)
    measurement = rng.choice(sorted(TAGS))
    rows = rng.randint(1, 60)
    pool = rng.sample(VALUES, rng.randint(1, 4))  # few values: keys repeat, and may collide
    tags = {
        name: np.array([rng.choice(pool) for _ in range(rows)], dtype=object)
        for name in ("node", *TAGS[measurement])
    }
    frame = Frame(measurement, np.arange(rows, dtype=np.int64), tags, {})
    distinct, codes = entity_groups(frame)
    expected_distinct, expected_codes = _reference(frame)
    assert distinct.tolist() == expected_distinct.tolist()
    assert codes.tolist() == expected_codes.tolist()
