"""Which workload state each entity was in this window, so that it is judged against its own
history in that state: a GPU under load against itself under load.

A spare node that joins a job from hours of idling is cool and low-clocked in its idle
history; under load it is hot and fast like its peers, which is no anomaly. And a GPU whose
clock was locked low under load (1,500 -> 900 MHz) looks ordinary against a history that
mixes idle windows (345 MHz) with busy ones. So each entity keeps one baseline per state:

* ``busy``: its node runs a job on it (the job's membership places a rank on the GPU, or on
  the node when the GPU is not known); without membership, at least half of the GPU's
  utilization samples in the window were computing;
* ``checkpoint``: its job is writing a checkpoint (its GPUs idle while its hosts write);
* ``idle``: the rest.

Membership comes first, so a fault that slows a rank's compute (a GPU stalling, a host under
contention) does not move its parts out of ``busy`` and into a history where the fault looks
ordinary. A host takes its node's state: a job's memory and CPU use are the job's, and a
one-node job has no peers to cancel them. A GPU or host of a node with neither membership nor
GPU utilization keeps one baseline for all states.

Ports keep one baseline for all states: their signals are error counters and link rates that
a job's load does not move, and a port quirk present from the start (steady symbol errors)
must stay its normal. A state's baseline is born when the state first comes, so a fault
present from a job's first step is judged by the part's peers, not its own history.

>>> import numpy as np
>>> from reflex_localize.flows.signals.job_pause import WindowActivity
>>> second = np.arange(10)
>>> activity = WindowActivity(idle={"n1": {"0": (second, np.zeros(10), np.ones(10)),
...     "1": (second, np.ones(10), np.ones(10))}})
>>> entities = np.array(["n1|gpu|0", "n1|gpu|1", "n1|host|-", "n2|gpu|0", "n3|gpu|5"], dtype=object)
>>> state_keys(entities, activity, Placement(gpus={"n3": {"5"}})).tolist()
['n1|gpu|0~busy', 'n1|gpu|1~idle', 'n1|host|-~busy', 'n2|gpu|0', 'n3|gpu|5~busy']
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.signals.job_pause import WRITE_BYTES_S, WindowActivity

BUSY, IDLE, CHECKPOINT = "busy", "idle", "checkpoint"
STATE_MARK = "~"  # entity~state: the baseline key of an entity in one state


@dataclass
class Placement:
    """Where jobs run this window, from their membership: node -> the GPUs its jobs' ranks
    run on (an empty set: the node's GPUs are not known, so all of them), and the nodes whose
    job is writing a checkpoint."""

    gpus: dict[str, set[str]] = field(default_factory=dict)
    checkpointing: set[str] = field(default_factory=set)


def state_keys(
    entities: np.ndarray, activity: WindowActivity, placement: Placement | None = None
) -> np.ndarray:
    """Each entity's baseline key this window: ``entity~state``, or the entity alone where
    nothing tells its node's state."""
    placement = placement or Placement()
    gpu_state, node_state = _measured_states(activity)
    for node, gpus in placement.gpus.items():
        running = CHECKPOINT if node in placement.checkpointing else BUSY
        node_state[node] = running
        for gpu in gpus:
            gpu_state[(node, gpu)] = running
    if not node_state:
        return entities
    keys = []
    for entity in entities.tolist():
        node, component, index = entity.split("|")
        state: str | None = None
        if component == "gpu":
            state = gpu_state.get((node, index))
            if state is None and node in placement.gpus and not placement.gpus[node]:
                state = node_state[node]  # a job on the node, its GPUs not known: all of them
        elif component == "host":
            state = node_state.get(node)
        keys.append(entity if state is None else f"{entity}{STATE_MARK}{state}")
    return np.array(keys, dtype=object)


def _measured_states(
    activity: WindowActivity,
) -> tuple[dict[tuple[str, str], str], dict[str, str]]:
    """States from GPU utilization alone: (node, GPU) -> state, node -> state."""
    gpu_state: dict[tuple[str, str], str] = {}
    node_state: dict[str, str] = {}
    for node, gpus in activity.idle.items():
        writing = activity.written.get(node, 0.0) >= WRITE_BYTES_S
        busy = 0
        for gpu, (_, idle, total) in gpus.items():
            samples = float(total.sum())  # once: a window has hundreds of GPUs
            computing = samples - float(idle.sum()) >= 0.5 * samples
            busy += computing
            gpu_state[(node, gpu)] = BUSY if computing else (CHECKPOINT if writing else IDLE)
        node_state[node] = BUSY if 2 * busy >= len(gpus) else (CHECKPOINT if writing else IDLE)
    return gpu_state, node_state


def entity_and_state(key: str) -> tuple[str, str]:
    """A baseline key's entity and state (``any``: one baseline for all states)."""
    entity, _, state = key.partition(STATE_MARK)
    return entity, state or "any"
