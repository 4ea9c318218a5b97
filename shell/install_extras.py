"""Which install extra each command needs, so that a node with the agent's install that runs
``reflex flow`` is told what to install instead of getting a traceback (standard library only).

>>> print(missing_extra("flow", "bytewax"))
'reflex flow' needs the 'flow' install (bytewax is missing): pip install 'reflex-localize[flow]'
"""

from __future__ import annotations

import sys

# bytewax 0.21 has wheels for these only; the [flow] extra leaves it out elsewhere.
FLOW_PYTHONS = ((3, 11), (3, 12))

# The agent's install runs what talks to InfluxDB on a node; the flow's adds the dataflow and
# the simulator's replays; everything else (scikit-learn, matplotlib) is 'all'.
EXTRA_OF_COMMAND = {
    "collect": "agent",
    "tokens": "agent",
    "influxdb": "agent",
    "smoke": "agent",
    "alerts": "agent",
    "setup": "agent",
    "replication": "agent",
    "remediate": "agent",
    "simulate": "flow",
    "localize": "flow",
    "flow": "flow",
    "fit-impact": "all",
    "eval": "all",
    "fit": "all",
    "report": "all",
    "demo": "all",
}


def missing_extra(command: str, module: str, version: tuple[int, int] | None = None) -> str:
    """What to install; for bytewax on a Python it has no wheels for, which Python to use.

    >>> missing_extra("flow", "bytewax", (3, 13)).split(" (")[0]
    "'reflex flow' needs Python 3.11 or 3.12"
    """
    extra = EXTRA_OF_COMMAND.get(command, "all")
    top = module.split(".")[0]
    version = version or (sys.version_info.major, sys.version_info.minor)
    if top == "bytewax" and version not in FLOW_PYTHONS:
        return (
            f"'reflex {command}' needs Python 3.11 or 3.12 (bytewax 0.21 has no wheels for "
            f"Python {version[0]}.{version[1]}, so the '{extra}' install leaves it out): run the "
            "flow from a Python 3.11 or 3.12 environment; the training hook and the agent run "
            "on this one"
        )
    return (
        f"'reflex {command}' needs the '{extra}' install ({top} is missing): "
        f"pip install 'reflex-localize[{extra}]'"
    )
