"""The simulator: the real Gantt engine on a virtual clock, against a simulated cloud (``gantt simulate``)."""

from gantt.sim.loader import load_scenario, parse_scenario
from gantt.sim.scenario import Scenario, ScenarioError
from gantt.sim.simulator import Simulation, run_scenario

__all__ = ["Scenario", "ScenarioError", "Simulation", "load_scenario", "parse_scenario", "run_scenario"]
