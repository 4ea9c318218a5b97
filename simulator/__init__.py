"""The simulated training cluster: realistic telemetry, injected faults and their ground truth.

It emits exactly the measurements of the real collectors (``schemas/``) as numpy frames, in
simulated time and much faster than real time, deterministically under a seed.

Imports only schemas and influx.

>>> from reflex_localize.simulator import Simulation, load_scenario
>>> sim = Simulation(load_scenario("demo"), seed=7)
>>> len(sim.cluster.nodes), sim.cluster.jobs[0].name, sim.duration_s
(32, 'llm-a', 600.0)
"""

from reflex_localize.simulator.cluster import ClusterSpec, JobSpec, NodeSpec
from reflex_localize.simulator.faults import FaultLabel, fault_types
from reflex_localize.simulator.scenario import (
    Scenario,
    family_names,
    family_scenarios,
    load_scenario,
    scale_scenario,
    scenario_names,
)
from reflex_localize.simulator.simulation import Simulation

__all__ = [
    "ClusterSpec",
    "FaultLabel",
    "JobSpec",
    "NodeSpec",
    "Scenario",
    "Simulation",
    "family_names",
    "family_scenarios",
    "fault_types",
    "load_scenario",
    "scale_scenario",
    "scenario_names",
]
