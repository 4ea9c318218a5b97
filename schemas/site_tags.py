"""Optional site tags: where a node sits (its rack, its leaf switch), as a site tags its points.

A site adds such tags to everything its agents write (Telegraf's ``[global_tags]``, a relabel
in Prometheus). They are not part of any measurement's key, so they are optional: a point may
carry them or not. Reflex declares ``rack`` and ``switch``; a site declares its own with
``REFLEX_SITE_TAGS`` (names separated by commas or spaces) or ``[site] tags = [...]`` in the
configuration file. A declared site tag is not counted as foreign; the flow remembers each
node's latest values (:func:`remember_sites`), which is what lets an event blame the switch
several degrading nodes share.

>>> site_tags(env={"REFLEX_SITE_TAGS": "pod, row"})
('rack', 'switch', 'pod', 'row')
>>> site_tags(env={}, config={"site": {"tags": ["pod"]}})
('rack', 'switch', 'pod')
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from reflex_localize.schemas.codec import SITE_TAGS
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.frame import Frame

DECLARED = SITE_TAGS  # writers take them too (schemas/codec.py)
ENV = "REFLEX_SITE_TAGS"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def site_tags(
    env: Mapping[str, str] | None = None, config: Mapping | None = None
) -> tuple[str, ...]:
    """Reflex's site tags, then the site's own from the config file and the environment;
    raises ValueError naming a bad one (not a tag name, or a tag of a measurement's key)."""
    env = os.environ if env is None else env
    extra: list[str] = list((config or {}).get("site", {}).get("tags", []))
    extra += [name for name in re.split(r"[,\s]+", env.get(ENV, "")) if name]
    keys = {tag for spec in load_schema().measurements.values() for tag in spec.tags}
    out = list(DECLARED)
    for name in extra:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"site tag {name!r} ({ENV} or [site] tags) is not a tag name")
        if name in keys:
            raise ValueError(f"site tag {name!r} is already a tag of a Reflex measurement")
        if name not in out:
            out.append(name)
    return tuple(out)


def remember_sites(
    frames: Iterable[Frame], sites: dict[str, dict[str, str]], names: tuple[str, ...]
) -> None:
    """Updates ``sites`` (node -> site tag -> value) with the site tags ``frames`` carry: the
    latest value wins, so a node moved to another rack follows."""
    for frame in frames:
        present = [name for name in names if name in frame.tags]
        if not present or "node" not in frame.tags or not len(frame):
            continue
        nodes = frame.tags["node"].tolist()
        for name in present:
            for node, value in dict(zip(nodes, frame.tags[name].tolist(), strict=True)).items():
                if value:
                    sites.setdefault(str(node), {})[name] = str(value)
