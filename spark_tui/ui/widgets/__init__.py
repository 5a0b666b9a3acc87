"""Cockpit widgets: nodes, recipes, fit, per-rank logs, results."""
