"""What a rank's last words say about its hardware.

Where no agent runs (a hook-only cluster, or the agent down on the node), a GPU that falls
off the bus leaves no XID in the flow, only the training events: the first rank exits with a
CUDA error and the others time out in NCCL. The exit message still tells a hardware death
from a software one often enough to name the first rank's GPU, at warning severity: PyTorch
surfaces the CUDA runtime's own words, and these are the ones that come from the device.

>>> hardware_hint("[rank3] process exited: CUDA error: uncorrectable ECC error encountered")
'uncorrectable ECC error'
>>> hardware_hint("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB") is None
True
"""

from __future__ import annotations

# Fragments (lower case) of messages that come from a failing device, not from the program.
# "illegal memory access" and "out of memory" are left out: most often the program's own bug.
_GPU_HINTS = (
    "uncorrectable ecc error",
    "ecc error",
    "fallen off the bus",
    "gpu is lost",
    "xid",
    "unspecified launch failure",
    "cuda error: unknown error",
    "nvlink error",
)


def hardware_hint(message: str) -> str | None:
    """The fragment of ``message`` that points at the GPU, or None."""
    lowered = message.lower()
    for hint in _GPU_HINTS:
        if hint in lowered:
            return hint if hint != "uncorrectable ecc error" else "uncorrectable ECC error"
    return None
