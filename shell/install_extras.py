"""Which install extra each command needs, so that a node with the agent's install that runs
``reflex flow`` is told what to install instead of getting a traceback (standard library only).

>>> print(missing_extra("flow", "bytewax"))
'reflex flow' needs the 'flow' install (bytewax is missing): pip install 'reflex-localize[flow]'
"""

from __future__ import annotations

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
    "simulate": "flow",
    "localize": "flow",
    "flow": "flow",
    "fit-impact": "all",
    "eval": "all",
    "fit": "all",
    "report": "all",
    "demo": "all",
}


def missing_extra(command: str, module: str) -> str:
    extra = EXTRA_OF_COMMAND.get(command, "all")
    top = module.split(".")[0]
    return (
        f"'reflex {command}' needs the '{extra}' install ({top} is missing): "
        f"pip install 'reflex-localize[{extra}]'"
    )
