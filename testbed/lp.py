"""Line-protocol spelling: tag sets, string fields, and per-node site tags."""

from __future__ import annotations

from testbed.model import Fleet, Node


def esc_tag(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def site(fleet: Fleet, node: Node) -> dict[str, str]:
    """The site tags this fleet's collectors add (Telegraf [global_tags], a relabel)."""
    if fleet.name == "hgx_ndr":
        return {"rack": node.rack, "switch": node.switch, "pod": node.pod}
    if fleet.name == "aisle_hdr":
        return {"rack": node.rack, "switch": node.switch}
    return {"rack": node.rack, "pod": node.pod}


def head(measurement: str, tags: dict[str, str]) -> str:
    """``measurement,k=v,...`` with the tags in key order, as Telegraf writes them."""
    return measurement + "".join(f",{k}={esc_tag(v)}" for k, v in sorted(tags.items()))
