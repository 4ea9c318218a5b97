"""Impact: rows of a window's ranks (their benign anomalies and their slowdown) enter.

A learned model of how much each anomaly, and each pair, slows a rank leaves, as a file.
"""
