"""The localization dataflow, its sources and sinks.

Imports only schemas and influx.
"""
