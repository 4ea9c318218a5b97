"""Security: where tokens come from, that they never leak, and TLS verification.

- Tokens come from ``REFLEX_INFLUX_TOKEN`` or a token file that only its owner can read; a
  config file holding a token is refused.
- A canary token is given to every CLI command on its success and error paths (unreachable
  InfluxDB, a refused token, a missing file); stdout, stderr, the spool and every file the
  command wrote are grepped for it.
- TLS: verification is on by default (a self-signed server is refused), a custom CA is
  honoured, and ``verify_ssl = false`` has to be written explicitly and logs a warning.

Least-privilege tokens: tests/test_tokens.py. Webhook timeout and redirects:
tests/test_alerts_webhook_security.py. Report escaping: tests/test_report.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_localize.influx.config import ConfigError, load_config
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
CANARY = "CANARY-" + uuid.uuid4().hex
POINT = Point("host", {"cluster": "c1", "node": "n1"}, {"load1": 0.5}, 1_700_000_000 * 10**9)


# ---- where tokens come from ------------------------------------------------------------


def test_token_file_must_be_private(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(CANARY)
    for mode in (0o644, 0o640, 0o604, 0o660):
        token_file.chmod(mode)
        with pytest.raises(ConfigError, match="readable by group or others") as raised:
            load_config(None, env={"REFLEX_INFLUX_TOKEN_FILE": str(token_file)})
        assert CANARY not in str(raised.value)
    token_file.chmod(0o600)
    config = load_config(None, env={"REFLEX_INFLUX_TOKEN_FILE": str(token_file)})
    assert config.influx.token == CANARY
    assert CANARY not in repr(config) and CANARY not in repr(config.influx)


def test_token_in_config_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "reflex.toml"
    path.write_text(f'[influx]\nurl = "http://x"\ntoken = "{CANARY}"\n')
    with pytest.raises(ConfigError, match=r"\[influx\]\.token") as raised:
        load_config(path, env={})
    assert CANARY not in str(raised.value) and str(path) in str(raised.value)


# ---- TLS ------------------------------------------------------------------------------------


def test_tls_verification_off_needs_explicit_flag_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert load_config(None, env={"REFLEX_INFLUX_URL": "https://x"}).influx.verify_ssl
    path = tmp_path / "reflex.toml"
    path.write_text('[influx]\nurl = "https://influx.example:8086"\nverify_ssl = false\n')
    with caplog.at_level(logging.WARNING, logger="reflex_localize.influx.config"):
        config = load_config(path, env={})
    assert not config.influx.verify_ssl
    assert any("NOT verified" in r.getMessage() and str(path) in r.getMessage()
               for r in caplog.records)  # fmt: skip


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A private CA and a server certificate for 127.0.0.1 signed by it (openssl CLI)."""
    directory = tmp_path_factory.mktemp("tls")
    files = {name: directory / f"{name}.pem" for name in ("ca", "ca_key", "cert", "key")}
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName = IP:127.0.0.1\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=reflex-test-ca", "-keyout", str(files["ca_key"]),
        "-out", str(files["ca"]))  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", str(files["key"]), "-out", str(directory / "server.csr"))  # fmt: skip
    run("x509", "-req", "-in", str(directory / "server.csr"), "-CA", str(files["ca"]),
        "-CAkey", str(files["ca_key"]), "-CAcreateserial", "-days", "2",
        "-extfile", str(ext), "-out", str(files["cert"]))  # fmt: skip
    return files


class TlsForwarder:
    """Terminates TLS on a loopback port and pipes the bytes to influxd's plain HTTP port."""

    def __init__(self, upstream_port: int, cert: Path, key: Path) -> None:
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        self._upstream = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            client = self._context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()  # the client refused our certificate: what the test wants to see
            return
        upstream = socket.create_connection(("127.0.0.1", self._upstream))
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)

    def close(self) -> None:
        self._listener.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def tls_influx(influx: InfluxServer, tls_files: dict[str, Path]) -> Iterator[str]:
    forwarder = TlsForwarder(influx.port, tls_files["cert"], tls_files["key"])
    yield f"https://127.0.0.1:{forwarder.port}"
    forwarder.close()


@pytest.mark.influx
def test_tls_verified_by_default_and_custom_ca_accepted(
    influx: InfluxServer, influx_bucket: str, tls_influx: str, tls_files: dict[str, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    default = Writer(tls_influx, influx.token, influx.org, influx_bucket, tmp_path / "a",
                     timeout_s=3.0)  # fmt: skip
    default.write([POINT])
    assert not default.flush(wait_s=0), "a certificate from an unknown CA was accepted"
    assert default.stats.sent == 0 and default.stats.retried >= 1
    default.close(wait_s=0)
    with Writer(tls_influx, influx.token, influx.org, influx_bucket, tmp_path / "b",
                timeout_s=3.0, ssl_ca_cert=str(tls_files["ca"])) as custom:  # fmt: skip
        custom.write([POINT])
        assert custom.flush(wait_s=10)
        assert custom.stats.sent == 1


# ---- the canary: no token in any output -----------------------------------------------------


def _reflex(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", *args],
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def _agent_config(tmp_path: Path, url: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[influx]\nurl = "{url}"\ntimeout_s = 2.0\n\n[identity]\ncluster = "c1"\nnode = "n1"\n\n'
        f'[collect]\nenabled = ["host", "nic", "kmsg"]\n'
        f'proc_root = "{FIXTURES / "host" / "proc"}"\nsys_root = "{FIXTURES / "nic" / "sys"}"\n'
        f'kmsg_path = "{FIXTURES / "kmsg" / "kmsg.txt"}"\nspool_dir = "{tmp_path / "spool"}"\n'
        "flush_interval_s = 0.5\n"
    )
    return config


@pytest.mark.influx
@pytest.mark.slow
def test_no_command_output_contains_the_token(influx: InfluxServer, tmp_path: Path) -> None:
    unreachable = "http://127.0.0.1:1"
    token_file = tmp_path / "token"
    token_file.write_text(CANARY)
    token_file.chmod(0o600)
    env = {"REFLEX_INFLUX_TOKEN": CANARY}
    runs = {
        "collect --once, unreachable InfluxDB": (
            ["collect", "--once", "--config", str(_agent_config(tmp_path / "a", unreachable))],
            env,
        ),
        "collect --once, token refused (401)": (
            ["collect", "--once", "--config", str(_agent_config(tmp_path / "b", influx.url))],
            env,
        ),
        "collect --once --stdout": (
            [
                "collect",
                "--once",
                "--stdout",
                "--config",
                str(_agent_config(tmp_path / "c", unreachable)),
            ],
            env,
        ),
        "smoke, no influxd": (["smoke", "--binary", str(tmp_path / "no-influxd")], env),
        "report, unreachable InfluxDB": (
            [
                "report",
                "abc",
                "--events",
                str(tmp_path / "none.jsonl"),
                "--influx-url",
                unreachable,
            ],
            env,
        ),
        "report, token file": (
            [
                "report",
                "abc",
                "--events",
                str(tmp_path / "none.jsonl"),
                "--influx-url",
                unreachable,
                "--token-file",
                str(token_file),
            ],
            {},
        ),
        "alerts install, unreachable": (
            [
                "alerts",
                "install",
                "--influx-url",
                unreachable,
                "--webhook-url",
                "http://127.0.0.1:1/h",
            ],
            env,
        ),
        "alerts install, token refused": (
            [
                "alerts",
                "install",
                "--influx-url",
                influx.url,
                "--token-file",
                str(token_file),
                "--webhook-url",
                "http://127.0.0.1:1/h",
            ],
            {},
        ),
        "flow --help": (["flow", "--help"], env),
        "flow, unreachable InfluxDB": (
            [
                "flow",
                "--source",
                "influx",
                "--sink",
                "influx",
                "--out",
                str(tmp_path / "flow"),
                "--stop-ns",
                "1",
            ],
            {**env, "REFLEX_INFLUX_URL": unreachable},
        ),
        "tokens create, unreachable": (
            ["tokens", "create", "--role", "agent"],
            {**env, "REFLEX_INFLUX_URL": unreachable},
        ),
        "tokens create, token refused": (
            ["tokens", "create", "--role", "flow"],
            {**env, "REFLEX_INFLUX_URL": influx.url},
        ),
    }
    outputs = {name: _reflex(args, run_env, tmp_path) for name, (args, run_env) in runs.items()}
    for name, output in outputs.items():
        assert CANARY not in output, f"{name} printed the token:\n{output}"
    assert "401" in outputs["collect --once, token refused (401)"]
    assert "401" in outputs["tokens create, token refused"]
    failed = [name for name, output in outputs.items() if not output.startswith("exit 0")]
    assert len(failed) >= 8, failed  # the error paths were really taken
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != token_file]
    leaks = [p for p in written if CANARY.encode() in p.read_bytes()]
    assert not leaks, leaks
    print(f"token canary: {len(runs)} commands ({len(failed)} on error paths), "
          f"{len(written)} files written, 0 leaks")  # fmt: skip
