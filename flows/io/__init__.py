"""Input and output: telemetry enters from files, InfluxDB queries or a replication stream.

Leaves as windows of points routed to node shards (``messages``); results leave through sinks.
"""
