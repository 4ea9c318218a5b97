"""JSON calls to InfluxDB's v2 API through the client the connection factory made.

The client library has no API for stacks, templates, remotes or replications; these callers
reach them with the client's own HTTP session, so its URL, token and TLS settings hold.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from influxdb_client import InfluxDBClient
from influxdb_client.rest import ApiException

from reflex_localize.influx.config import InfluxSettings

Json = dict[str, Any]


class JsonApi:
    """``call`` raises ``error_type`` with the server's answer (which never echoes a token)."""

    error_type: type[Exception] = RuntimeError

    def __init__(self, client: InfluxDBClient, settings: InfluxSettings) -> None:
        self._client, self._settings = client, settings

    def call(self, method: str, path: str, body: Json | None = None) -> Json:
        try:
            response = self._client.api_client.call_api(
                path,
                method,
                header_params={"Content-Type": "application/json"},
                body=body,
                auth_settings=[],  # the client sends its token in every request
                _preload_content=False,
                _return_http_data_only=True,
            )
        except ApiException as error:
            detail = (error.body or b"").decode(errors="replace")[:500] if error.body else ""
            raise self.error_type(
                f"InfluxDB at {self._settings.url}: {method} {path.split('?')[0]}: "
                f"HTTP {error.status} {error.reason} {detail}".rstrip()
            ) from None
        raw = response.data
        parsed: Json = json.loads(raw) if raw else {}
        return parsed

    def org_id(self) -> str:
        try:
            orgs = self.call("GET", f"/api/v2/orgs?org={quote(self._settings.org)}").get("orgs", [])
        except self.error_type as error:
            if "HTTP 404" not in str(error):  # 2.x answers 404 to an unknown org name
                raise
            orgs = []
        if not orgs:
            raise self.error_type(f"no organization {self._settings.org!r}")
        return str(orgs[0]["id"])
