"""Host names, racks, switches and pods the way three kinds of sites name them."""

from __future__ import annotations

import random


def hgx_names(count: int, rng: random.Random) -> list[tuple[str, str, str, str]]:
    """``hgx-0412.dc2``: a numbered block per row, 8 per rack, a leaf switch per 2 racks."""
    first = rng.choice([401, 3101, 1201])
    out = []
    for i in range(count):
        rack = i // 8
        out.append((f"hgx-{first + i:04d}.dc2", f"dc2-r{rack + 1:02d}",
                    f"leaf-{rack // 2 + 1:02d}", f"pod-{'ab'[i * 2 // count]}"))  # fmt: skip
    return out


def aisle_names(count: int, rng: random.Random) -> list[tuple[str, str, str, str]]:
    """``gpu-a17-r03``: aisle a, rack 17, position 3 (4 per rack, racks not contiguous)."""
    racks = sorted(rng.sample(range(10, 40), (count + 3) // 4))
    out = []
    for i in range(count):
        rack = racks[i // 4]
        out.append((f"gpu-a{rack}-r{i % 4 * 2 + 3:02d}", f"a{rack}",
                    f"ib-leaf-{rack // 4}", f"su{rack // 8}"))  # fmt: skip
    return out


def site_names(count: int, rng: random.Random) -> list[tuple[str, str, str, str]]:
    """``sjc1-h200-117``: site, SKU, serial-ish number, 4 nodes per rack."""
    base = rng.randrange(100, 700)
    out = []
    for i in range(count):
        rack = i // 4
        out.append((f"sjc1-h200-{base + i}", f"sjc1-r{rack + 30}", f"tor-{rack + 30}",
                    f"spine-{rack // 4}"))  # fmt: skip
    return out
