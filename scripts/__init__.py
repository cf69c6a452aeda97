"""Operator scripts run against a real, throwaway Loremaster (`bin/load`).

A package so a script can `from scripts.procs import Stack` when run as
`python -m scripts.<name>` from the repository root.
"""
