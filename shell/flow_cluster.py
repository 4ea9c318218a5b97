"""Which cluster a flow reads when ``--cluster`` does not say (see :mod:`flows.io.one_cluster`).

Chosen before any process starts where it can be, so that every process of a cluster and every
restart follows the same one: the cluster the recovery directory was made with; else, for a
file, the first named cluster of its head; for the simulator, its scenario's. A live source
shows its clusters only as they arrive: the flow follows the first it sees, which only one
process can do alone, so a live flow of several processes must be told.

>>> cluster_of_source("sim:demo:7")
'sim'
>>> cluster_of_source("influx") is None
True
"""

from __future__ import annotations

from pathlib import Path

from reflex_localize.flows.io.one_cluster import UNNAMED, first_cluster

LIVE_SOURCES = ("influx", "influx-push")


def chosen_cluster(given: str | None, source: str, saved: object) -> str | None:
    """The cluster to read: ``given``, else the one the recovery was ``saved`` with, else the
    source's first; None: a live source's first (the flow follows it). A recovery saved with
    :data:`UNNAMED` was made by a flow that read every cluster and named none: it decides
    nothing."""
    if given:
        return given
    if isinstance(saved, str) and saved and saved != UNNAMED:
        return saved
    return cluster_of_source(source)


def cluster_parameters(cluster: str | None, saved: object) -> dict[str, str]:
    """What the recovery guard keeps and compares of the cluster: nothing while it is not
    chosen yet, or where the recovery was saved with :data:`UNNAMED` (see above)."""
    return {} if cluster is None or saved == UNNAMED else {"cluster": cluster}


def cluster_of_source(source: str) -> str | None:
    """The cluster a source spec (``file:PATH``, ``sim:SCENARIO[:SEED]``) shows first; None for
    a live source, or a file whose head holds no telemetry."""
    kind, _, rest = source.partition(":")
    if kind == "file" and rest:
        return first_cluster(Path(rest))
    if kind == "sim" and rest:
        return scenario_cluster(rest.partition(":")[0])
    return None


def scenario_cluster(scenario: str) -> str:
    """The cluster a scenario (a library name or a file) simulates."""
    from reflex_localize.simulator import load_scenario

    return load_scenario(scenario).cluster_name


def untold_live_problem(source: str, processes: int, addresses: str | None) -> str | None:
    """Why a live flow cannot follow the first cluster it sees: its processes could each see
    another first."""
    if source not in LIVE_SOURCES or (processes == 1 and addresses is None):
        return None
    return (
        f"--source {source} read by several processes needs --cluster NAME: each process "
        "would follow the first cluster it sees (a flow reads one cluster)"
    )
