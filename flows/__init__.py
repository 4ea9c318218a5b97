"""The localization dataflow, its sources and sinks.

Imports only schemas and influx.

Rooms, in the data's way: ``io`` (sources, receivers, sinks), ``signals`` (per-window
derivation), ``judge`` (baselines, peers, triggers, evidence), ``incidents`` (events, words,
routing, memory), ``impact`` (the learned model). ``localize`` wires them into one dataflow.
"""

from reflex_localize.flows.moved_modules import install as _answer_old_module_names

_answer_old_module_names()
