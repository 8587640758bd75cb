"""Gantt as Nova's scheduler: the seam between Nova 34's objects and Gantt's data contract.

Importable only where nova 34 is installed (a deployment installs Gantt into Nova's environment); core Gantt never
imports this package, and this package is the only place in Gantt that imports nova. See docs/nova.md.
"""
