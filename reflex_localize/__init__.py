"""Reflex: finds the faulty node of a large LLM training job from its telemetry in InfluxDB.

The one import name the ``reflex-localize`` distribution installs. Its subpackages are the
repository's top-level folders (symbolic links here, plain folders in the wheel), stacked as
floors; each imports only the floors below it, as its ``__init__`` says:

* ``shell``: the ``reflex`` command, the demo, reports, eval and fit harnesses (top);
* ``collectors``, ``simulator``, ``flows``, ``dashboards``: side by side, none imports another;
* ``influx``: the one package that talks to InfluxDB;
* ``schemas``: the contract (bottom).
"""
