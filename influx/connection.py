"""The one way Reflex opens an InfluxDB client, from :class:`InfluxSettings`: URL, org, token,
timeout, TLS verification and CA file, all in one place so no command forgets one.

Retries stay off: each caller owns its retry policy (the writer backs off and spools, the
flow's source waits for the next poll), and urllib3 must not retry behind its back.

>>> settings = InfluxSettings(url="http://127.0.0.1:8086", token="t", timeout_s=2.5)
>>> with connect(settings) as client:
...     client.url, client.org, client.api_client.configuration.timeout
('http://127.0.0.1:8086', 'reflex', 2500)
"""

from __future__ import annotations

from influxdb_client import InfluxDBClient

from reflex_localize.influx.config import InfluxSettings


def connect(
    settings: InfluxSettings, *, gzip: bool = False, timeout_s: float | None = None
) -> InfluxDBClient:
    """A client for ``settings``; ``timeout_s`` overrides the settings' for slow calls."""
    timeout = settings.timeout_s if timeout_s is None else timeout_s
    return InfluxDBClient(
        settings.url,
        settings.token,
        org=settings.org,
        timeout=int(timeout * 1000),
        enable_gzip=gzip,
        verify_ssl=settings.verify_ssl,
        ssl_ca_cert=settings.ssl_ca_cert or None,
        retries=False,
    )
