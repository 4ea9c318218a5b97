"""Grafana dashboards, InfluxDB alert tasks, the Flux cookbook.

Imports only schemas and influx.
"""
