"""Which of a node's ports carry the job's collectives (rails) and which do not.

A node has its compute HCAs (200-400 Gb/s, one per GPU or two) and, beside them, ports that
carry none of the job's collectives: a management Ethernet port (1-100 GbE), a storage NIC,
the netdev face of an HCA. Compared with the HCAs, a 25 GbE management port is "slow" on every
node of a fleet, which says nothing: a property every node shares is not an anomaly. So ports
are peers only of ports of their own role, and only a rail can be a job's communication
straggler.

* Where ``gpu_topology`` says which HCA port serves which GPU, the ports that serve a GPU are
  the node's rails and every other port is not.
* An IPoIB netdev (``ib0``, ``ibp3s0``) is the face of an HCA: its role is a rail's.
* Without topology, a port (an InfiniBand/RoCE port by its rate, a netdev by its speed) whose
  highest rate seen is at least ``RAIL_SHARE`` of the fastest port of its node is taken for a
  rail, and slower ports are not. The highest rate seen is the port's capability, so a rail
  that trains down later stays a rail and is judged against the other rails. A node that
  reports no rate at all keeps every port a possible rail: nothing tells them apart.

Ports are peers only of ports of their role and capability (:func:`port_kinds`): a 100 Gb/s
storage HCA on every node beside 200 Gb/s rails is not a slow rail either; a capability that
only a node or two show is a port that came up below its kind's rate.

>>> import numpy as np
>>> entities = np.array(["n1|nic|mlx5_0/1", "n1|nic|mlx5_1/1", "n1|nic|mlx5_4/1", "n1|gpu|0",
...     "n1|nic|eth0"], dtype=object)
>>> rates = np.array([400.0, 400.0, 25.0, np.nan, 100.0])
>>> peaks = {}
>>> roles = nic_roles(entities, rates, {}, peaks)
>>> [roles[e] for e in entities.tolist() if e in roles]
['rail', 'rail', 'other', 'other']
>>> nic_roles(entities, np.array([200.0, 400.0, 25.0, np.nan, 100.0]), {}, peaks)["n1|nic|mlx5_0/1"]
'rail'
>>> nic_roles(entities, rates, {"n1|gpu|0": "n1|nic|mlx5_1/1"}, peaks)["n1|nic|mlx5_0/1"]
'other'
>>> nic_roles(entities[:1], np.array([np.nan]), {}, {})  # no rate known: may be a rail
{'n1|nic|mlx5_0/1': 'rail'}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

# A port this share of its node's fastest port's rate, or faster, may be a rail: a 400 Gb/s
# fleet's management port (25-100 GbE) is a quarter or less; a rail run at half rate is not.
RAIL_SHARE = 0.3
RAIL, OTHER = "rail", "other"


def nic_roles(
    entities: np.ndarray,
    rates: np.ndarray,
    rails: Mapping[str, str],
    peaks: dict[str, float],
) -> dict[str, str]:
    """NIC entity -> ``rail`` or ``other``. ``rates``: each row's link rate this window in
    Gb/s (NaN where the row is no port, or its rate is not known); ``rails``: GPU entity -> the
    port of its rail (from gpu_topology); ``peaks``: each port's highest rate seen, updated."""
    names = entities.tolist()
    for entity, rate in zip(names, rates.tolist(), strict=True):
        if rate == rate and rate > peaks.get(entity, 0.0):  # not NaN
            peaks[entity] = float(rate)
    served = set(rails.values())
    placed_nodes = {port.split("|", 1)[0] for port in served}
    fastest: dict[str, float] = {}
    for entity, peak in peaks.items():
        node = entity.split("|", 1)[0]
        fastest[node] = max(fastest.get(node, 0.0), peak)
    roles = {}
    for entity in names:
        node, component, index = entity.split("|")
        if component != "nic":
            continue
        if index.startswith("ib"):
            # Linux names an InfiniBand port's IP interface ib0, ib1, ibp3s0: the netdev face
            # of an HCA, whose link is its rail's. (gpu_topology names the HCA, not it.)
            roles[entity] = RAIL
        elif node in placed_nodes:
            roles[entity] = RAIL if entity in served else OTHER
        else:
            top = fastest.get(node, 0.0)
            roles[entity] = RAIL if peaks.get(entity, top) >= RAIL_SHARE * top else OTHER
    return roles


def port_kinds(roles: Mapping[str, str], peaks: Mapping[str, float]) -> dict[str, str]:
    """Each port's peer kind: its role and its capability (highest rate seen, Gb/s). A kind
    that at least half of the nodes have (a 100 Gb/s storage HCA on every node) is a kind of
    its own; one that few nodes have is a port of the common kind of its role that never came
    up at its rate (a rail trained down from boot), judged with that kind.

    >>> roles = {f"n{i}|nic|mlx5_{j}/1": "rail" for i in range(4) for j in range(2)}
    >>> peaks = {e: 200.0 if e == "n3|nic|mlx5_1/1" else 400.0 for e in roles}
    >>> peaks |= {f"n{i}|nic|mlx5_9/1": 100.0 for i in range(4)}  # a storage HCA on each
    >>> roles |= {f"n{i}|nic|mlx5_9/1": "rail" for i in range(4)}
    >>> kinds = port_kinds(roles, peaks)
    >>> kinds["n3|nic|mlx5_1/1"], kinds["n0|nic|mlx5_9/1"]
    ('rail@400', 'rail@100')
    """
    kinds = {entity: f"{role}@{peaks.get(entity, 0.0):g}" for entity, role in roles.items()}
    nodes_of: dict[str, set[str]] = {}
    for entity, kind in kinds.items():
        nodes_of.setdefault(kind, set()).add(entity.split("|", 1)[0])
    nodes = {entity.split("|", 1)[0] for entity in kinds}
    common: dict[str, str] = {}  # role -> its kind on the most nodes
    ports = Counter(kinds.values())
    # The kind on the most nodes, then with the most ports (8 rails beat 1 storage HCA).
    for kind in sorted(nodes_of, key=lambda k: (-len(nodes_of[k]), -ports[k], k)):
        common.setdefault(kind.split("@", 1)[0], kind)
    return {
        entity: kind if 2 * len(nodes_of[kind]) >= len(nodes) else common[kind.split("@", 1)[0]]
        for entity, kind in kinds.items()
    }
