"""The InfluxDB instances a fleet's telemetry is read from: ``[influx]`` alone, or each
``[[telemetry_instances]]`` table of the config file.

InfluxDB OSS does not cluster, so a large fleet writes to several instances, each node agent to
the one of its rack group (``docs/flow-cluster.md``), and the flow reads them all. Each table
takes the keys of ``[influx]``; a key it leaves out is ``[influx]``'s (the token too, unless the
table names its own ``token_file``: each instance set up on its own has its own token). Results
still go to ``[influx]``.

>>> from reflex_localize.influx.config import Identity
>>> config = Config(None, InfluxSettings(url="http://a:8086", bucket="t", token="t0"), Identity(),
...     {TABLE: [{"url": "http://a:8086"}, {"url": "http://b:8086", "org": "rack-b"}]})
>>> [(s.url, s.org, s.bucket, s.token) for s in telemetry_instances(config)]
[('http://a:8086', 'reflex', 't', 't0'), ('http://b:8086', 'rack-b', 't', 't0')]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from reflex_localize.influx.config import (
    Config,
    ConfigError,
    InfluxSettings,
    read_token_file,
    section_as,
)

TABLE = "telemetry_instances"


def telemetry_instances(config: Config) -> tuple[InfluxSettings, ...]:
    """Every instance to read telemetry from, in the file's order; raises ConfigError."""
    entries = config.sections.get(TABLE)
    if entries is None:
        return (config.influx,)
    where = f"{config.path}: [[{TABLE}]]"
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where}: expected one or more [[{TABLE}]] tables")
    instances = tuple(
        _instance(entry, config.influx, f"{where} #{number}")
        for number, entry in enumerate(entries, 1)
    )
    places = [(s.url.rstrip("/"), s.org, s.bucket) for s in instances]
    if len(set(places)) != len(places):  # its nodes' points would reach the flow twice
        raise ConfigError(f"{where}: an instance (url, org, bucket) is listed twice")
    return instances


def _instance(entry: object, base: InfluxSettings, where: str) -> InfluxSettings:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a table")
    if "token" in entry:
        raise ConfigError(
            f"{where}.token: tokens are not read from the config file; use token_file"
        )
    if not entry.get("url"):
        raise ConfigError(f"{where}.url: each instance needs its url")
    inherited = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    del inherited["token"]  # not a key of the file; taken below
    settings = section_as({**inherited, **entry}, InfluxSettings, where=where)
    if "token_file" in entry:
        token = read_token_file(Path(settings.token_file), f"{where}.token_file")
    else:
        token = base.token
    return dataclasses.replace(settings, token=token)
