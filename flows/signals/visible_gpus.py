"""Which of its node's GPUs a rank runs on, when the job sees only some of them.

The training hook reports the CUDA device index the rank uses (its local rank). That is the
node's NVML index, the one the agent writes, only when the process sees every GPU in order. A
Slurm step bound to some GPUs, or a Kubernetes pod given four of eight, sees its own GPUs
numbered from 0: two such jobs on one node would both claim GPU 0, and a slow rank would be
blamed on the wrong GPU. So the hook also sends the two lists that renumber them, as the
process saw them, and this module undoes the renumbering:

* ``CUDA_VISIBLE_DEVICES``: CUDA's devices, in the order listed, by index or UUID (CUDA's
  documentation, "CUDA Environment Variables"). One entry means the rank uses that one.
* ``NVIDIA_VISIBLE_DEVICES``: the GPUs the NVIDIA container runtime put in the container, by
  index or UUID, ``all`` for every one (the NVIDIA Container Toolkit's documentation). Inside,
  CUDA numbers them in PCI order, which is NVML's index order: the n-th device is the n-th
  lowest index listed.

A UUID is turned into an index through the agent's ``gpu_info``; until that has arrived (or
for a MIG instance, which ``gpu_info`` does not list) the GPU stays unknown, and the flow
places the rank by rank order as for a hook that sent no GPU. Integer entries in
``CUDA_VISIBLE_DEVICES`` are taken as NVML's order, which CUDA follows on a node of one GPU
model (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` on any node).

>>> node_gpu(1, "4,5,6,7", "")  # Slurm bound the step to GPUs 4-7
5
>>> node_gpu(3, "6", "")  # one GPU per task: the rank's local rank does not matter
6
>>> node_gpu(0, "", "GPU-b,GPU-a", {"GPU-a": 2, "GPU-b": 7})  # a pod of two: PCI order
2
>>> node_gpu(2, "", ""), node_gpu(2, "", "all")  # nothing to undo
(2, 2)
>>> node_gpu(1, "", "GPU-b,GPU-a", {"GPU-a": 2}) is None  # GPU-b's index not known yet
True
"""

from __future__ import annotations

from collections.abc import Mapping

UNRENUMBERED = ("", "all")  # every GPU, in NVML's order: the device index is the NVML index
NO_GPUS = ("none", "void")


def renumbered(cuda: str, nvidia: str) -> bool:
    """Whether the lists renumber the process's devices (else its device index is the node's)."""
    return bool(_entries(cuda)) or nvidia.strip().lower() not in UNRENUMBERED


def node_gpu(
    device: int, cuda: str, nvidia: str, uuids: Mapping[str, int] | None = None
) -> int | None:
    """The NVML index of the process's CUDA ``device`` given its visible-device lists (as
    strings, "" when unset) and the node's UUID -> index map; None when they do not tell."""
    uuids = uuids or {}
    listed = _entries(cuda)
    if listed:
        if len(listed) == 1:
            device = 0
        if not 0 <= device < len(listed):
            return None
        entry = listed[device]
        if not entry.isdigit():  # a UUID names its GPU whatever the container holds
            return _by_uuid(entry, uuids)
        device = int(entry)
    if nvidia.strip().lower() in UNRENUMBERED:
        return device if device >= 0 else None
    if nvidia.strip().lower() in NO_GPUS:
        return None
    container = _entries(nvidia)
    indices = [int(e) if e.isdigit() else _by_uuid(e, uuids) for e in container]
    if any(index is None for index in indices) or not 0 <= device < len(indices):
        return None
    return sorted(index for index in indices if index is not None)[device]


def _by_uuid(entry: str, uuids: Mapping[str, int]) -> int | None:
    """CUDA takes a UUID's unique prefix too ("GPU-8932f937"); a MIG instance is no GPU here."""
    if entry in uuids:
        return uuids[entry]
    matches = [index for uuid, index in uuids.items() if uuid.startswith(entry)]
    return matches[0] if len(matches) == 1 and entry.startswith("GPU-") else None


def _entries(listed: str) -> list[str]:
    # CUDA stops at the first entry it cannot read; an empty one is the usual such mistake.
    out = []
    for entry in listed.split(","):
        entry = entry.strip()
        if not entry:
            break
        out.append(entry)
    return out
