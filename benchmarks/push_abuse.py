"""The push endpoint under the issue-40 flood: 3,000 idle connections and a silent TLS client.

Opens ``--idle`` plain TCP connections that never send a byte, and one that starts a TLS
handshake and stops, against a TLS push endpoint; then times ``/ping`` over a fresh TLS
connection, and reports the threads and connections the receiver holds and the warnings it
logged. Before the guarded server (``influx/guarded_http.py``) one silent TLS client stopped
the endpoint, and 3,000 idle plain connections made 2,974 threads.

    .venv/bin/python benchmarks/push_abuse.py [--idle 3000] [--pings 50] [--max-connections 512]
"""

from __future__ import annotations

import argparse
import http.client
import logging
import resource
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from reflex_localize.flows.io.push_receiver import PushReceiver


def _certificate(folder: Path) -> ssl.SSLContext:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=3000)
    parser.add_argument("--pings", type=int, default=50)
    parser.add_argument("--max-connections", type=int, default=512)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * args.idle + 256)), hard))
    logging.basicConfig(level=logging.WARNING, format="  log: %(message)s")
    with tempfile.TemporaryDirectory() as folder:
        server_side = _certificate(Path(folder))
        client_side = ssl.create_default_context(cafile=str(Path(folder) / "cert.pem"))
        threads = threading.active_count()
        receiver = PushReceiver(lambda lines, label: None, token="t", port=0,
                                ssl_context=server_side,
                                max_connections=args.max_connections).start()  # fmt: skip
        silent = socket.create_connection(("127.0.0.1", receiver.port))
        silent.sendall(b"\x16\x03\x01\x00\xff")  # a ClientHello begun, never finished
        started = time.monotonic()
        idle = [socket.create_connection(("127.0.0.1", receiver.port)) for _ in range(args.idle)]
        opened = time.monotonic() - started
        times = []
        for _ in range(args.pings):
            begin = time.monotonic()
            connection = http.client.HTTPSConnection("127.0.0.1", receiver.port, timeout=10,
                                                     context=client_side)  # fmt: skip
            connection.request("GET", "/ping")
            assert connection.getresponse().status == 204
            connection.close()
            times.append(time.monotonic() - begin)
        times.sort()
        held = receiver._server.open_connections if receiver._server else 0
        print(f"{args.idle} idle connections opened in {opened:.1f} s; "
              f"the receiver holds {held} (cap {args.max_connections}), "
              f"threads +{threading.active_count() - threads}")  # fmt: skip
        print(f"/ping over TLS: median {times[len(times) // 2] * 1000:.1f} ms, "
              f"slowest {times[-1] * 1000:.1f} ms of {len(times)}")  # fmt: skip
        print(f"abuse counted: {dict(receiver.abuse)}")
        for sock in [*idle, silent]:
            sock.close()
        receiver.stop()


if __name__ == "__main__":
    main()
