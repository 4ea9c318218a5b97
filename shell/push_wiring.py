"""The push source (``REFLEX_SOURCE=influx-push``) from ``REFLEX_PUSH_*`` variables, which
``reflex flow`` passes on to its processes as they are:

* ``REFLEX_PUSH_LISTEN``: ``HOST:PORT`` the replication stream writes to (default
  ``127.0.0.1:8087``). Process ``K`` of a cluster (``bytewax.run -i K``) listens on
  ``PORT + K``: one replication stream per process (see :mod:`flows.push_source`).
* ``REFLEX_PUSH_TOKEN`` or ``REFLEX_PUSH_TOKEN_FILE`` (mode 600): the token the stream must
  present, the flow's own, not an InfluxDB token.
* ``REFLEX_PUSH_TLS_CERT`` and ``REFLEX_PUSH_TLS_KEY``: PEM files; with them the endpoint
  speaks HTTPS only.
* ``REFLEX_PUSH_REPLAY``: ``DATA_NS,WALL_NS,SPEED``: windows close by a clock that read
  ``DATA_NS`` at wall time ``WALL_NS`` and runs ``SPEED`` times faster, to replay past telemetry
  through InfluxDB faster than real time (tests, benchmarks); unset, the wall clock.

The backfill reads the ``[influx]`` bucket with the ``[influx]`` token (read access is enough),
or each ``[[telemetry_instances]]`` of the config (:mod:`reflex_localize.influx.instances`);
``REFLEX_LAG_SECONDS``, ``REFLEX_START_NS`` and ``REFLEX_STOP_NS`` mean what they mean for the
polling source.
"""

from __future__ import annotations

import itertools
import os
import ssl
import sys
import time
from collections.abc import Callable
from pathlib import Path

from reflex_localize.flows.io.push_source import PushSource
from reflex_localize.influx.config import InfluxSettings, read_token_file


class PushWiringError(ValueError):
    pass


def push_source(
    influx: InfluxSettings,
    shards: int,
    window_seconds: float,
    backfill_from: tuple[InfluxSettings, ...] = (),
) -> PushSource:
    host, port = _listen(os.environ.get("REFLEX_PUSH_LISTEN") or "127.0.0.1:8087")
    start, stop = os.environ.get("REFLEX_START_NS"), os.environ.get("REFLEX_STOP_NS")
    clock, speed = replay_clock(os.environ.get("REFLEX_PUSH_REPLAY", ""))
    return PushSource(
        influx,
        push_token=_push_token(),
        host=host,
        port=port + _process_index(sys.argv),
        n_shards=shards,
        window_seconds=window_seconds,
        lag_seconds=float(os.environ.get("REFLEX_LAG_SECONDS", "5")),
        start_ns=int(start) if start else None,
        stop_ns=int(stop) if stop else None,
        ssl_context=_tls(),
        clock=clock,
        clock_speed=speed,
        backfill_from=backfill_from,
    )


def check_push_settings() -> None:
    """Reads every ``REFLEX_PUSH_*`` setting once, so that ``reflex flow`` stops on a mistake in
    one line before it starts any process; raises :class:`PushWiringError` or ``ConfigError``."""
    _listen(os.environ.get("REFLEX_PUSH_LISTEN") or "127.0.0.1:8087")
    _push_token()
    _tls()
    replay_clock(os.environ.get("REFLEX_PUSH_REPLAY", ""))


def replay_clock(spec: str) -> tuple[Callable[[], int], float]:
    """The clock ``REFLEX_PUSH_REPLAY`` describes, and its speed.

    >>> clock, speed = replay_clock("1000,0,2")
    >>> speed, abs(clock() - 2 * time.time_ns()) < 10**9
    (2.0, True)
    """
    if not spec:
        return time.time_ns, 1.0
    try:
        data_text, wall_text, speed_text = spec.split(",")
        data, wall, speed = int(data_text), int(wall_text), float(speed_text)
    except ValueError:
        raise PushWiringError(
            f"REFLEX_PUSH_REPLAY={spec!r}: expected DATA_NS,WALL_NS,SPEED"
        ) from None
    if speed <= 0:
        raise PushWiringError(f"REFLEX_PUSH_REPLAY={spec!r}: SPEED must be > 0")
    return (lambda: data + int((time.time_ns() - wall) * speed)), speed


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PushWiringError(f"REFLEX_PUSH_LISTEN={value!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _process_index(argv: list[str]) -> int:
    """This process's index in its Bytewax cluster (``bytewax.run -i K``), 0 when alone."""
    for flag, value in itertools.pairwise(argv):
        if flag in ("-i", "--process-id") and value.isdigit():
            return int(value)
    return 0


def _push_token() -> str:
    if os.environ.get("REFLEX_PUSH_TOKEN"):
        return os.environ["REFLEX_PUSH_TOKEN"].strip()
    path = os.environ.get("REFLEX_PUSH_TOKEN_FILE")
    if path:
        return read_token_file(Path(path), "REFLEX_PUSH_TOKEN_FILE")
    raise PushWiringError(
        "--source influx-push needs the flow's own push token: REFLEX_PUSH_TOKEN_FILE (mode 600) "
        "or REFLEX_PUSH_TOKEN"
    )


def _tls() -> ssl.SSLContext | None:
    cert, key = os.environ.get("REFLEX_PUSH_TLS_CERT"), os.environ.get("REFLEX_PUSH_TLS_KEY")
    if not cert and not key:
        return None
    if not (cert and key):
        raise PushWiringError("REFLEX_PUSH_TLS_CERT and REFLEX_PUSH_TLS_KEY go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise PushWiringError(f"REFLEX_PUSH_TLS_CERT/KEY ({cert}, {key}): {error}") from None
    return context
