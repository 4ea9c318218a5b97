"""Which workload state each entity was in this window, so that it is judged against its own
history in that state: a GPU under load against itself under load.

A spare node that joins a job from hours of idling is cool and low-clocked in its idle
history; under load it is hot and fast like its peers, which is no anomaly. And a GPU whose
clock was locked low under load (1,500 -> 900 MHz) looks ordinary against a history that
mixes idle windows (345 MHz) with busy ones. So each entity keeps one baseline per state:

* ``busy``: at least half of the GPU's utilization samples in the window were computing;
* ``checkpoint``: idle while its host wrote a checkpoint's worth of bytes out;
* ``idle``: the rest.

A host's or port's state is its node's (most of its GPUs). An entity whose node sent no GPU
utilization keeps one baseline for all states, as before.

>>> import numpy as np
>>> from reflex_localize.flows.signals.job_pause import WindowActivity
>>> second = np.arange(10)
>>> activity = WindowActivity(idle={"n1": {"0": (second, np.zeros(10), np.ones(10)),
...     "1": (second, np.ones(10), np.ones(10))}})
>>> state_keys(np.array(["n1|gpu|0", "n1|gpu|1", "n1|host|-", "n2|gpu|0"], dtype=object),
...     activity).tolist()
['n1|gpu|0~busy', 'n1|gpu|1~idle', 'n1|host|-~busy', 'n2|gpu|0']
"""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.signals.job_pause import WRITE_BYTES_S, WindowActivity

BUSY, IDLE, CHECKPOINT = "busy", "idle", "checkpoint"
STATE_MARK = "~"  # entity~state: the baseline key of an entity in one state


def state_keys(entities: np.ndarray, activity: WindowActivity) -> np.ndarray:
    """Each entity's baseline key this window: ``entity~state``, or the entity alone where
    its node's GPUs sent no utilization."""
    gpu_state: dict[tuple[str, str], str] = {}
    node_state: dict[str, str] = {}
    for node, gpus in activity.idle.items():
        writing = activity.written.get(node, 0.0) >= WRITE_BYTES_S
        busy = 0
        for gpu, (_, idle, total) in gpus.items():
            computing = float(total.sum() - idle.sum()) >= 0.5 * float(total.sum())
            busy += computing
            gpu_state[(node, gpu)] = BUSY if computing else (CHECKPOINT if writing else IDLE)
        node_state[node] = BUSY if 2 * busy >= len(gpus) else (CHECKPOINT if writing else IDLE)
    if not node_state:
        return entities
    keys = []
    for entity in entities.tolist():
        node, component, index = entity.split("|")
        state = gpu_state.get((node, index)) if component == "gpu" else None
        state = state or node_state.get(node)
        keys.append(entity if state is None else f"{entity}{STATE_MARK}{state}")
    return np.array(keys, dtype=object)


def entity_and_state(key: str) -> tuple[str, str]:
    """A baseline key's entity and state (``any``: one baseline for all states)."""
    entity, _, state = key.partition(STATE_MARK)
    return entity, state or "any"
