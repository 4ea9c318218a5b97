"""One POST of line protocol to InfluxDB's /api/v2/write, answered as a plain status.

The writer decides what to do with an answer (send on, drop, split, back off, spool); this
module only makes the request through influxdb-client's synchronous WriteApi (gzip on) and
turns whatever happens into a :class:`SendResult`. A connection error or timeout is status 0.
Nothing here puts the token into a message.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import urllib3
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException
from influxdb_client.service.ping_service import PingService

from reflex_localize.influx.clock_offset import ClockOffset
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect

NO_RESPONSE = 0
_MAX_RETRY_AFTER_S = 3600.0  # a server asking for more than an hour is misconfigured


@dataclass(frozen=True)
class SendResult:
    status: int  # HTTP status, or NO_RESPONSE for connection errors and timeouts
    message: str = ""
    retry_after_s: float | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class WriteTransport(Protocol):
    def send(self, body: bytes) -> SendResult: ...

    def close(self) -> None: ...


class InfluxWriteTransport:
    """POSTs line protocol to one bucket with influxdb-client, synchronously, gzip'd."""

    def __init__(
        self,
        url: str,
        token: str,
        org: str,
        bucket: str,
        *,
        timeout_s: float = 10.0,
        verify_ssl: bool = True,
        ssl_ca_cert: str | None = None,
        clock_offset: ClockOffset | None = None,
    ) -> None:
        self.url, self.org, self.bucket = url, org, bucket
        self.clock_offset = clock_offset
        settings = InfluxSettings(
            url=url,
            org=org,
            bucket=bucket,
            token=token,
            timeout_s=timeout_s,
            verify_ssl=verify_ssl,
            ssl_ca_cert=ssl_ca_cert or "",
        )
        self._client = connect(settings, gzip=True)
        self._write_api = self._client.write_api(write_options=SYNCHRONOUS)

    def __repr__(self) -> str:
        return f"InfluxWriteTransport(url={self.url!r}, org={self.org!r}, bucket={self.bucket!r})"

    def send(self, body: bytes) -> SendResult:
        sent_ns = self._wall()
        try:
            # Reflex timestamps are ns, which is also the client's default precision.
            self._write_api.write(self.bucket, self.org, record=body)
        except ApiException as error:
            self._observe_clock(sent_ns, error.headers)
            return SendResult(
                int(error.status or NO_RESPONSE),
                _short(error.message),
                parse_retry_after(error.retry_after),
            )
        except (urllib3.exceptions.HTTPError, OSError) as error:
            return SendResult(NO_RESPONSE, f"{type(error).__name__}: {_short(error)}")
        if self.clock_offset is not None:
            observe_last_answer(self._client, self.clock_offset, sent_ns)
        return SendResult(204)

    def probe_clock(self, timeout_s: float = 2.0) -> bool:
        """One ``/ping`` for the server's time, before anything is collected and stamped;
        False when InfluxDB does not answer (the first writes will measure instead)."""
        if self.clock_offset is None:
            return False
        return probe_server_clock(self._client, self.clock_offset, timeout_s)

    def _wall(self) -> int:
        return self.clock_offset.wall() if self.clock_offset is not None else 0

    def _observe_clock(self, sent_ns: int, headers: Mapping[str, str] | None) -> None:
        """Every answer carries the server's time; see :mod:`influx.clock_offset`."""
        if self.clock_offset is None or headers is None:
            return
        self.clock_offset.observe(sent_ns, self._wall(), headers.get("Date"))

    def close(self) -> None:
        self._client.close()


def probe_server_clock(client: InfluxDBClient, offset: ClockOffset, timeout_s: float) -> bool:
    """One ``/ping`` (short timeout) whose ``Date`` feeds ``offset``; False without an answer."""
    sent_ns = offset.wall()
    try:
        # The client reads ``_request_timeout`` in milliseconds: seconds given as they were
        # left a "2 s" probe 2 ms to answer, and a loaded server's clock unread.
        PingService(client.api_client).get_ping(_request_timeout=timeout_s * 1000)
    except (ApiException, urllib3.exceptions.HTTPError, OSError):
        return False
    observe_last_answer(client, offset, sent_ns)
    return True


def observe_last_answer(client: InfluxDBClient, offset: ClockOffset, sent_ns: int) -> None:
    """Feeds ``offset`` the ``Date`` of the client's last answer, read whole or streamed."""
    response = client.api_client.last_response
    raw = getattr(response, "urllib3_response", response)
    headers = getattr(raw, "headers", None)
    if headers is not None:
        offset.observe(sent_ns, offset.wall(), headers.get("Date"))


def parse_retry_after(value: object) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if value is None or value == "":
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER_S)


def _short(message: object, limit: int = 300) -> str:
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return " ".join(text.split())[:limit]
