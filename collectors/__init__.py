"""The node agent: one collector per source, the training hook.

Imports only schemas and influx.
"""
