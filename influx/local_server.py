"""A throwaway InfluxDB 2.x on loopback: for tests, the smoke check and a local stack.

:func:`start_influxdb` finds the ``influxd`` binary (building it if it must), runs it on
127.0.0.1 on a free port with its data in a temporary directory, sets up org ``reflex`` with
buckets ``telemetry`` and ``reflex`` and a token it knows, and waits on ``/health``.
:meth:`InfluxServer.stop` and :meth:`InfluxServer.start` take it down and bring it back on
the same port and data, which is how the writer's outage tests pull the plug.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect

INFLUXDB_VERSION = "2.9.1"
ORG = "reflex"
TELEMETRY_BUCKET = "telemetry"
RESULTS_BUCKET = "reflex"
HTTP_TIMEOUT_S = 10.0
STARTUP_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
# Building from source took 8 minutes cold on two cores here; allow for slower machines.
BUILD_TIMEOUT_S = 90 * 60
_BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "infra" / "build_influxdb.sh"
_TOKEN_FILE = "reflex-token"  # 2.9 stores tokens hashed, so a reused data dir keeps ours here
_log = logging.getLogger(__name__)


class InfluxServerError(RuntimeError):
    """influxd could not be found, built, started or set up."""


def find_influxd(binary: Path | None = None) -> Path:
    """The influxd to run: ``binary``, else $REFLEX_INFLUXD, else the cached build, else a build."""
    if binary is not None:
        return _executable(Path(binary))
    from_env = os.environ.get("REFLEX_INFLUXD")
    if from_env:
        return _executable(Path(from_env))
    cache = Path(os.environ.get("REFLEX_CACHE", Path.home() / ".cache" / "reflex"))
    cached = cache / f"influxd-{INFLUXDB_VERSION}"
    if os.access(cached, os.X_OK):
        return cached
    return _build_influxd()


def _executable(path: Path) -> Path:
    if not os.access(path, os.X_OK):
        raise InfluxServerError(f"{path} is not an executable influxd")
    return path


def _build_influxd() -> Path:
    if not _BUILD_SCRIPT.exists():
        raise InfluxServerError(
            "no influxd found: set $REFLEX_INFLUXD or run infra/build_influxdb.sh from a checkout"
        )
    _log.warning(
        "influxd %s is not built yet; building it (minutes: see docs/influxdb-build.md)",
        INFLUXDB_VERSION,
    )
    done = subprocess.run(
        [str(_BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, timeout=BUILD_TIMEOUT_S
    )
    if done.returncode != 0:
        raise InfluxServerError(f"{_BUILD_SCRIPT} failed (exit {done.returncode}); see its log")
    return _executable(Path(done.stdout.strip().splitlines()[-1]))


def free_port() -> int:
    # Racy in theory (the port is released before influxd binds it); fine on loopback in tests.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def consecutive_free_ports(count: int) -> int:
    """A port P such that P .. P + count - 1 are free: `reflex flow -p N` with the push source
    listens on the base port plus each process's index."""
    while True:
        port = free_port()
        try:
            with contextlib.ExitStack() as stack:
                for offset in range(count):
                    probe = stack.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port + offset))
            return port
        except OSError:
            continue


class InfluxServer:
    """One influxd process on loopback, set up with org, buckets and token.

    >>> with start_influxdb() as server:  # doctest: +SKIP
    ...     server.bucket, server.results_bucket, server.url.startswith("http://127.0.0.1:")
    ('telemetry', 'reflex', True)
    """

    def __init__(
        self, binary: Path, data_dir: Path, port: int, token: str, *, owns_data_dir: bool
    ) -> None:
        self.binary, self.data_dir, self.port = binary, data_dir, port
        self.token = token
        self.org, self.bucket, self.results_bucket = ORG, TELEMETRY_BUCKET, RESULTS_BUCKET
        self._owns_data_dir = owns_data_dir
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # the token stays out of reprs, logs and tracebacks
        return f"InfluxServer(url={self.url!r}, data_dir={str(self.data_dir)!r})"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "influxd.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> InfluxServer:
        """Starts influxd (again) on the same port and data, and waits until it is ready."""
        if self.running:
            return self
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._private_files()
        with self.log_path.open("ab") as log:
            # umask 077: influxd.sqlite holds every token (the push token too) and influxd
            # makes it 644; nothing influxd writes here is for other users.
            self._process = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                umask=0o077,
            )  # fmt: skip
        atexit.register(self.stop)
        try:
            self._wait_healthy()
            if self._setup_allowed():
                self._set_up()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stops influxd (SIGTERM, then SIGKILL after a grace period); the data stays."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)

    def close(self) -> None:
        """Stops influxd and removes the data directory if this server created it."""
        self.stop()
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> InfluxServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def create_bucket(self, name: str, retention_seconds: int = 0) -> str:
        """Creates a bucket in the org and returns its id."""
        org_id = self._request("GET", f"/api/v2/orgs?org={ORG}")["orgs"][0]["id"]
        rules = [{"type": "expire", "everySeconds": retention_seconds}] if retention_seconds else []
        body = {"orgID": org_id, "name": name, "retentionRules": rules}
        bucket_id: str = self._request("POST", "/api/v2/buckets", body)["id"]
        return bucket_id

    def delete_bucket(self, name: str) -> None:
        buckets = self._request("GET", f"/api/v2/buckets?org={ORG}&name={name}")["buckets"]
        for bucket in buckets:
            self._request("DELETE", f"/api/v2/buckets/{bucket['id']}")

    def settings(
        self, bucket: str = TELEMETRY_BUCKET, token: str | None = None, timeout_s: float = 30.0
    ) -> InfluxSettings:
        """How to reach this server: its URL and org, its operator token unless told another."""
        token = self.token if token is None else token
        return InfluxSettings(
            url=self.url, org=self.org, bucket=bucket, token=token, timeout_s=timeout_s
        )

    def query_rows(self, flux: str) -> list[dict[str, Any]]:
        """Runs a Flux query and returns every record's values, all tables flattened."""
        with connect(self.settings()) as client:
            tables = client.query_api().query(flux)
        return [dict(record.values) for table in tables for record in table.records]

    # ---- internals ------------------------------------------------------------------------

    def _command(self) -> list[str]:
        d = self.data_dir
        return [
            str(self.binary),
            "--reporting-disabled",
            f"--http-bind-address=127.0.0.1:{self.port}",
            f"--bolt-path={d / 'influxd.bolt'}",
            f"--sqlite-path={d / 'influxd.sqlite'}",
            f"--engine-path={d / 'engine'}",
            "--log-level=warn",
        ]

    def _private_files(self) -> None:
        """The metadata stores of a data directory made before, readable by their owner only."""
        for path in [*self.data_dir.glob("influxd.sqlite*"), self.data_dir / "influxd.bolt"]:
            if path.is_file() and path.stat().st_mode & 0o077:
                path.chmod(0o600)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise InfluxServerError(f"influxd exited at start:\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if json.load(response).get("status") == "pass":
                        return
            except (OSError, ValueError):
                pass  # not listening yet
            time.sleep(0.1)
        raise InfluxServerError(f"influxd not healthy after {STARTUP_TIMEOUT_S} s")

    def _setup_allowed(self) -> bool:
        allowed: bool = self._request("GET", "/api/v2/setup", auth=False)["allowed"]
        return allowed

    def _set_up(self) -> None:
        body = {
            "username": "reflex",
            "password": secrets.token_urlsafe(16),
            "org": ORG,
            "bucket": TELEMETRY_BUCKET,
            "token": self.token,
        }
        self._request("POST", "/api/v2/setup", body, auth=False)
        token_file = self.data_dir / _TOKEN_FILE
        token_file.write_text(self.token)
        token_file.chmod(0o600)
        self.create_bucket(RESULTS_BUCKET)

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, auth: bool = True
    ) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Token {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            raise InfluxServerError(f"{method} {path}: HTTP {error.code}: {detail}") from None
        parsed: dict[str, Any] = json.loads(raw) if raw else {}
        return parsed

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def start_influxdb(
    binary: Path | None = None,
    data_dir: Path | None = None,
    *,
    port: int | None = None,
    token: str | None = None,
) -> InfluxServer:
    """Starts a set-up influxd on 127.0.0.1 and returns it running.

    Without ``data_dir`` the data lives in a temporary directory removed by ``close()``. A
    ``data_dir`` that was set up before keeps its token (from the file influxd cannot give back).
    """
    owns = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="reflex-influxd-")) if data_dir is None else data_dir
    token_file = directory / _TOKEN_FILE
    if token is None:
        token = token_file.read_text().strip() if token_file.exists() else secrets.token_hex(24)
    server = InfluxServer(
        find_influxd(binary), directory, port or free_port(), token, owns_data_dir=owns
    )
    try:
        return server.start()
    except BaseException:
        server.close()
        raise
