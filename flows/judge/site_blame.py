"""Several nodes under one switch degrading together: the switch, not a node.

Site tags (``rack``, ``switch``, a site's own: :mod:`schemas.site_tags`) say where each node
hangs. A leaf switch with a bad port buffer, a failing fan or a firmware fault slows every
node cabled to it; peers then see two or three nodes off at once, and blaming the loudest of
them sends the SRE to the wrong box.

>>> from reflex_localize.flows.incidents.events import Suspect
>>> sites = {"n1": {"switch": "leaf-3"}, "n2": {"switch": "leaf-3"}, "n3": {"switch": "leaf-9"}}
>>> suspects = [Suspect("n1", "nic", "mlx5_0/1", 9.0), Suspect("n2", "nic", "mlx5_0/1", 7.0)]
>>> shared_switch(suspects, sites, 3.0)
'leaf-3'
>>> shared_switch(suspects[:1], sites, 3.0) is None
True
"""

from __future__ import annotations

from collections import Counter

from reflex_localize.flows.incidents.events import Evidence, Suspect

SWITCH_TAG = "switch"


def shared_switch(
    suspects: list[Suspect], sites: dict[str, dict[str, str]], min_score: float
) -> str | None:
    """The switch under which at least two suspect nodes (each worth naming) sit, when they
    make most of the strong suspects; None otherwise."""
    strong = {s.node for s in suspects if s.score >= min_score}
    switches = Counter(sites[n][SWITCH_TAG] for n in strong if SWITCH_TAG in sites.get(n, {}))
    if not switches:
        return None
    switch, nodes = switches.most_common(1)[0]
    return switch if nodes >= 2 and nodes * 3 >= len(strong) * 2 else None


def switch_suspect(
    switch: str, suspects: list[Suspect], sites: dict[str, dict[str, str]]
) -> Suspect:
    """A suspect standing for the switch, its evidence the nodes under it that degrade."""
    under = [s for s in suspects if sites.get(s.node, {}).get(SWITCH_TAG) == switch]
    evidence = [
        Evidence(f"under {switch}: {s.node} {s.component} {s.index}", None, None, s.score, 0)
        for s in under
    ]
    return Suspect(switch, "switch", "-", round(sum(s.score for s in under), 3), evidence)
