"""The simulated training cluster: realistic telemetry, injected faults and their ground truth.

It emits exactly the measurements of the real collectors (``schemas/``) as numpy frames, in
simulated time and much faster than real time, deterministically under a seed.

>>> from collectors.simulated import Simulation, load_scenario
>>> sim = Simulation(load_scenario("demo"), seed=7)
>>> len(sim.cluster.nodes), sim.cluster.jobs[0].name, sim.duration_s
(32, 'llm-a', 600.0)
"""

from collectors.simulated.cluster import ClusterSpec, JobSpec, NodeSpec
from collectors.simulated.faults import FaultLabel, fault_types
from collectors.simulated.scenario import Scenario, load_scenario, scale_scenario, scenario_names
from collectors.simulated.simulation import Simulation

__all__ = [
    "ClusterSpec",
    "FaultLabel",
    "JobSpec",
    "NodeSpec",
    "Scenario",
    "Simulation",
    "fault_types",
    "load_scenario",
    "scale_scenario",
    "scenario_names",
]
