"""Signals off their own history on many nodes of several jobs at once: the site's.

Within a job, ``job_wide_phase`` (:mod:`flows.judge.job_evidence`) takes a signal that left
its own history on a quarter of the job's nodes (three or more, not all under one switch) for
the fabric's or the site's. A small job has too few nodes to see that: a shared filesystem
that slows every job's hosts at once shows in a one-node job as its one host's IO wait, and
would name that host. The shard sees every job on its nodes. A signal off its own history on
``FABRIC_WIDE_NODES`` or more busy nodes of two or more jobs at once, a quarter of the shard's
busy nodes or more, not all under one switch, is the site's in every job that window; a part
that also stands out from its peers is still judged (``job_wide_phase``).

>>> e = np.array([f"n{i}|host|-" for i in range(4)], dtype=object)
>>> d = np.zeros((4, len(SIGNAL_NAMES)))
>>> d[:3, SIGNAL_NAMES.index("host_io_pressure")] = 5.0
>>> site_wide_signals(e, d, {"n0": {"a"}, "n1": {"b"}, "n2": {"c"}, "n3": {"c"}}, {})
['host_io_pressure']
>>> site_wide_signals(e, d, {"n0": {"a"}, "n1": {"a"}, "n2": {"a"}, "n3": {"a"}}, {})
[]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from reflex_localize.flows.judge.site_blame import SWITCH_TAG
from reflex_localize.flows.signals.derive import SIGNAL_NAMES, factorize

# Nodes at least, off their own history in one signal at once, that make an anomaly the
# fabric's or the site's (also job_wide_phase's, within one job).
FABRIC_WIDE_NODES = 3
OFF = 3.0  # spreads off its own history, in the direction that is bad


def site_wide_signals(
    entities: np.ndarray,
    deviation: np.ndarray,
    jobs_on_node: Mapping[str, set[str]],
    sites: Mapping[str, Mapping[str, str]],
) -> list[str]:
    """The signals off their own history on many busy nodes of several jobs at once (see the
    module docstring). ``deviation``: each entity's departure from its own history, signed so
    that the bad direction is positive."""
    if not len(entities) or len(jobs_on_node) < FABRIC_WIDE_NODES:
        return []
    nodes = np.array([e.split("|", 1)[0] for e in entities.tolist()], dtype=object)
    busy = np.array([n in jobs_on_node for n in nodes.tolist()])
    if not busy.any():
        return []
    names, which = factorize(nodes[busy])
    off = np.nan_to_num(deviation[busy], nan=0.0) >= OFF
    per_node = np.zeros((len(names), deviation.shape[1]), dtype=bool)
    np.logical_or.at(per_node, which, off)
    count = per_node.sum(axis=0)
    wide = []
    for col in np.flatnonzero((count >= FABRIC_WIDE_NODES) & (4 * count >= len(jobs_on_node))):
        off_nodes = names[per_node[:, col]].tolist()
        jobs = set().union(*(jobs_on_node[n] for n in off_nodes))
        switches = {sites.get(n, {}).get(SWITCH_TAG) for n in off_nodes}
        if len(jobs) >= 2 and (len(switches) > 1 or None in switches):
            wide.append(SIGNAL_NAMES[col])
    return wide
