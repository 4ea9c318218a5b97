"""A user's mistake on the ``reflex`` command line ends in one short line that says what and
where, with a non-zero exit, never a traceback: options out of range, paths that are missing
or cannot be written, files that are not what they should be, a token InfluxDB refuses, an
InfluxDB that does not answer.

``reflex flow`` and ``reflex alerts relay`` run in a subprocess: one that got past its checks
would replace the test process (``os.execve``) or serve forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import event_json
from reflex_localize.influx.local_server import free_port
from reflex_localize.shell.cli import main

WRONG_TOKEN = "not-the-token"
MAX_LINES = 3  # besides click's "Usage:" and "Try ... --help" lines
PROCESS_TIMEOUT_S = 60

TINY_SCENARIO = """name = "tiny"
duration_s = 60
[cluster]
nodes = 2
gpus_per_node = 8
[[job]]
name = "j"
nodes = 2
"""
TINY_FAULT = """name = "tiny_fault"
duration_s = 300
[cluster]
nodes = 4
gpus_per_node = 8
[[job]]
name = "j"
nodes = 4
[[fault]]
type = "fail_slow_gpu"
job = "j"
job_node = 1
gpu = 2
onset_s = 120
"""
FAULT = '[[fault]]\ntype = "{type}"\njob = "{job}"\nonset_s = {onset}\n'
UNKNOWN_FAULT = TINY_SCENARIO + FAULT.format(type="gremlins", job="j", onset="10")


@dataclass(frozen=True)
class Mistake:
    """One mistaken command line. ``args`` and ``names`` (what the one line must mention,
    separated by " | ") are templates over the paths of :func:`inputs` ({in}), the test's own
    folder ({tmp}) and the InfluxDB addresses ({url}: the real one; {refused}: a free port)."""

    args: str
    names: str
    env: dict[str, str] = field(default_factory=dict)
    process: bool = False  # run as `python -m reflex_localize`, not in-process
    influx: bool = False  # needs the real InfluxDB ({url})


def flow(args: str, names: str, **options: Any) -> Mistake:
    return Mistake(f"flow --sink files --out {{tmp}}/flow {args}", names, process=True, **options)


WRONG = {"REFLEX_INFLUX_TOKEN": WRONG_TOKEN}
REFUSED = "{refused} | cannot reach"
TOKEN_REFUSED = "{url} | token was refused"
LP = "--source file:{in}/tiny.lp"
RELAY = "alerts relay --forward-url http://127.0.0.1:9/hook"
LOCALIZE = "localize --replay {in}/tiny.lp"
REPORT = "report e1 --replay {in}/tiny.lp"
TINY = "{in}/tiny.toml"

MISTAKES: dict[str, Mistake] = {
    # reflex flow: ranges
    "flow-window-zero": flow(f"{LP} --no-recovery --window 0", "--window"),
    "flow-window-negative": flow(f"{LP} --no-recovery --window -5", "--window"),
    "flow-shards-zero": flow(f"{LP} --no-recovery --shards 0", "--shards"),
    "flow-lag-negative": flow(f"{LP} --no-recovery --lag -1", "--lag"),
    "flow-workers-zero": flow(f"{LP} --no-recovery -w 0", "--workers"),
    "flow-processes-zero": flow(f"{LP} --no-recovery -p 0", "--processes"),
    "flow-snapshot-interval-zero": flow(f"{LP} -s 0", "--snapshot-interval"),
    "flow-backup-interval-negative": flow(f"{LP} -b -1", "--backup-interval"),
    "flow-recovery-parts-zero": flow(f"{LP} --recovery-parts 0", "--recovery-parts"),
    "flow-process-id-negative": flow(f"{LP} --no-recovery -i -1 -a :{{port}}", "--process-id"),
    "flow-process-id-beyond-addresses": flow(f"{LP} --no-recovery -i 1 -a :{{port}}",
                                             "-i 1 | 1 address"),
    "flow-addresses-malformed": flow(f"{LP} --no-recovery -i 0 -a nowhere", "--addresses"),
    "flow-stop-before-start": flow(f"{LP} --no-recovery --start-ns 20 --stop-ns 10", "--stop-ns"),
    # reflex flow: the source, the folders, the token
    "flow-source-missing-file": flow("--source file:{in}/missing.lp --no-recovery",
                                     "--source | missing.lp | no such file"),
    "flow-source-directory": flow("--source file:{in} --no-recovery", "--source | a directory"),
    "flow-source-unknown-kind": flow("--source kafka:topic --no-recovery", "--source | kafka"),
    "flow-source-unknown-scenario": flow("--source sim:nosuch --no-recovery", "--source | nosuch"),
    "flow-source-bad-seed": flow("--source sim:demo:abc --no-recovery", "--source | abc"),
    "flow-out-under-a-file": flow(f"{LP} --no-recovery --out {{in}}/a_file.txt/flow",
                                  "--out | a_file.txt"),
    "flow-recovery-dir-under-a-file": flow(f"{LP} --recovery-dir {{in}}/a_file.txt/recovery",
                                           "--recovery-dir | a_file.txt"),
    "flow-source-influx-wrong-token": flow(
        "--source influx --no-recovery --influx-url {url} --start-ns 1767225600000000000 "
        "--stop-ns 1767225660000000000", TOKEN_REFUSED, env=WRONG, influx=True,
    ),
    "flow-sink-influx-wrong-token": flow(f"{LP} --sink influx --no-recovery --influx-url {{url}}",
                                         TOKEN_REFUSED, env=WRONG, influx=True),
    # reflex localize
    "localize-window-zero": Mistake(f"{LOCALIZE} --window 0", "--window"),
    "localize-window-negative": Mistake(f"{LOCALIZE} --window -5", "--window"),
    "localize-seed-negative": Mistake(f"localize --scenario {TINY} --seed -1", "--seed"),
    "localize-unknown-scenario": Mistake("localize --scenario nosuch", "--scenario | nosuch"),
    "localize-scenario-unknown-fault": Mistake("localize --scenario {in}/unknown_fault.toml",
                                               "unknown_fault.toml | gremlins"),
    "localize-replay-directory": Mistake("localize --replay {in}", "--replay | directory"),
    "localize-events-out-missing-folder": Mistake(
        f"{LOCALIZE} --events-out {{tmp}}/missing/events.jsonl", "--events-out | missing"
    ),
    "localize-weights-not-json": Mistake(f"{LOCALIZE} --weights {{in}}/not_json.jsonl",
                                         "--weights | not_json.jsonl"),
    # reflex demo
    "demo-out-under-a-file": Mistake(f"demo --scenario {TINY} --no-live --out {{in}}/a_file.txt/d",
                                     "--out | a_file.txt"),
    "demo-seed-negative": Mistake(f"demo --scenario {TINY} --no-live --seed -1 --out {{tmp}}/d",
                                  "--seed"),
    "demo-unknown-scenario": Mistake("demo --scenario nosuch --no-live --out {tmp}/d",
                                     "--scenario | nosuch"),
    "demo-wrong-token": Mistake(f"demo --scenario {TINY} --no-live --out {{tmp}}/d "
                                "--influx-url {url}", TOKEN_REFUSED, env=WRONG, influx=True),
    "demo-local-influx-not-executable": Mistake(
        f"demo --scenario {TINY} --no-live --out {{tmp}}/d --local-influx",
        "a_file.txt | executable", env={"REFLEX_INFLUXD": "{in}/a_file.txt"},
    ),
    # reflex simulate
    "simulate-out-missing-folder": Mistake(f"simulate {TINY} --out {{tmp}}/missing/tiny.lp",
                                           "--out | missing"),
    "simulate-truth-missing-folder": Mistake(
        f"simulate {TINY} --out {{tmp}}/tiny.lp --truth {{tmp}}/missing/truth.json",
        "--truth | missing",
    ),
    "simulate-negative-duration": Mistake("simulate {in}/negative_duration.toml --out {tmp}/x.lp",
                                          "negative_duration.toml | duration_s"),
    "simulate-unknown-fault": Mistake("simulate {in}/unknown_fault.toml --out {tmp}/x.lp",
                                      "unknown_fault.toml | gremlins"),
    "simulate-scenario-directory": Mistake("simulate {in}/folder.toml --out {tmp}/x.lp",
                                           "folder.toml | directory"),
    "simulate-scenario-not-toml": Mistake("simulate {in}/not_toml.toml --out {tmp}/x.lp",
                                          "not_toml.toml"),
    "simulate-fault-on-unknown-job": Mistake("simulate {in}/fault_unknown_job.toml",
                                             "fault_unknown_job.toml | nojob"),
    "localize-fault-onset-not-a-number": Mistake("localize --scenario {in}/onset_text.toml",
                                                 "--scenario | onset_text.toml | onset_s"),
    "simulate-seed-negative": Mistake(f"simulate {TINY} --seed -1 --out {{tmp}}/x.lp", "--seed"),
    "simulate-spool-dir-under-a-file": Mistake(
        f"simulate {TINY} --influx-url {{refused}} --spool-dir {{in}}/a_file.txt/spool",
        "--spool-dir | a_file.txt", env=WRONG,
    ),
    "simulate-wrong-token": Mistake(f"simulate {TINY} --influx-url {{url}} --spool-dir {{tmp}}/s",
                                    TOKEN_REFUSED, env=WRONG, influx=True),
    "simulate-connection-refused": Mistake(
        f"simulate {TINY} --influx-url {{refused}} --spool-dir {{tmp}}/s", REFUSED, env=WRONG
    ),
    # reflex report
    "report-events-not-json": Mistake(f"{REPORT} --events {{in}}/not_json.jsonl --out {{tmp}}/r",
                                      "--events | not_json.jsonl | line 1"),
    "report-events-truncated": Mistake(f"{REPORT} --events {{in}}/truncated.jsonl --out {{tmp}}/r",
                                       "--events | truncated.jsonl | line 2"),
    "report-events-wrong-shape": Mistake(
        f"{REPORT} --events {{in}}/wrong_shape.jsonl --out {{tmp}}/r",
        "--events | wrong_shape.jsonl | line 1",
    ),
    "report-out-under-a-file": Mistake(
        f"{REPORT} --events {{in}}/events.jsonl --out {{in}}/a_file.txt/r", "--out | a_file.txt"
    ),
    "report-timeout-zero": Mistake(f"{REPORT} --events {{in}}/events.jsonl --timeout 0 "
                                   "--out {tmp}/r", "--timeout"),
    "report-wrong-token": Mistake("report e1 --events {in}/events.jsonl --influx-url {url} "
                                  "--out {tmp}/r", TOKEN_REFUSED, env=WRONG, influx=True),
    # reflex alerts
    "alerts-install-wrong-token": Mistake(
        "alerts install --webhook-url http://127.0.0.1:9/hook --influx-url {url}",
        TOKEN_REFUSED, env=WRONG, influx=True,
    ),
    "alerts-install-connection-refused": Mistake(
        "alerts install --webhook-url http://127.0.0.1:9/hook --influx-url {refused}",
        REFUSED, env=WRONG,
    ),
    "alerts-uninstall-connection-refused": Mistake("alerts uninstall --influx-url {refused}",
                                                   REFUSED, env=WRONG),
    "alerts-url-without-scheme": Mistake("alerts uninstall --influx-url influx-host:8086",
                                         "influx-host:8086 | http", env=WRONG),
    "alerts-relay-timeout-zero": Mistake(f"{RELAY} --listen 127.0.0.1:{{port}} --timeout 0",
                                         "--timeout", process=True),
    "alerts-relay-port-not-a-number": Mistake(f"{RELAY} --listen 127.0.0.1:http", "--listen",
                                              process=True),
    "alerts-relay-port-out-of-range": Mistake(f"{RELAY} --listen 127.0.0.1:70000", "--listen",
                                              process=True),
    # reflex tokens
    "tokens-wrong-token": Mistake("tokens create --role agent --influx-url {url}", TOKEN_REFUSED,
                                  env=WRONG, influx=True),
    "tokens-connection-refused": Mistake("tokens create --role agent --influx-url {refused}",
                                         REFUSED, env=WRONG),
    "tokens-out-missing-folder": Mistake(
        "tokens create --role agent --influx-url {url} --out {tmp}/missing/agent.token",
        "--out | missing", influx=True,
    ),
    # reflex collect
    "collect-once-wrong-token": Mistake("collect --config {tmp}/collect.toml --once "
                                        "--influx-url {url}", TOKEN_REFUSED, env=WRONG,
                                        influx=True),
    # reflex influxdb, smoke
    "influxdb-port-out-of-range": Mistake("influxdb start --port 70000", "--port", influx=True),
    "influxdb-binary-missing": Mistake("influxdb start --binary {in}/missing", "--binary"),
    "influxdb-binary-not-executable": Mistake("influxdb start --binary {in}/a_file.txt",
                                              "a_file.txt | executable"),
    "smoke-binary-missing": Mistake("smoke --binary {in}/missing", "--binary"),
    # reflex fit
    "fit-seed-negative": Mistake(f"fit --scenarios {TINY} --seed -1", "--seed"),
    "fit-unknown-scenario": Mistake("fit --scenarios nosuch", "--scenarios | nosuch"),
    "fit-no-faulty-examples": Mistake(f"fit --scenarios {TINY} --out {{tmp}}/w.json",
                                      "--scenarios | faulty"),
    "fit-out-missing-folder": Mistake("fit --scenarios {in}/tiny_fault.toml "
                                      "--out {tmp}/missing/w.json", "--out | missing"),
    "fit-feedback-not-json": Mistake(
        "fit --scenarios {in}/tiny_fault.toml --events {in}/events.jsonl "
        "--feedback {in}/not_json.jsonl --out {tmp}/w.json",
        "--feedback | not_json.jsonl | line 1",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Input files, good and bad, shared by every case."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "tiny.toml").write_text(TINY_SCENARIO)
    (folder / "negative_duration.toml").write_text(
        TINY_SCENARIO.replace("duration_s = 60", "duration_s = -5")
    )
    (folder / "unknown_fault.toml").write_text(UNKNOWN_FAULT)
    (folder / "tiny_fault.toml").write_text(TINY_FAULT)
    (folder / "fault_unknown_job.toml").write_text(
        TINY_SCENARIO + FAULT.format(type="xid79", job="nojob", onset="10")
    )
    (folder / "onset_text.toml").write_text(
        TINY_SCENARIO + FAULT.format(type="xid79", job="j", onset='"soon"')
    )
    (folder / "not_toml.toml").write_text("duration_s = = 60\n")
    (folder / "folder.toml").mkdir()
    (folder / "a_file.txt").write_text("a file, not a folder\n")
    (folder / "not_json.jsonl").write_text("this is not JSON\n")
    event = LocalizationEvent(
        "e1", 1_767_225_630 * 10**9, "sim", "j", "regression", "info", 0.6, [], "none", "x"
    )
    (folder / "events.jsonl").write_text(event_json(event) + "\n")
    (folder / "truncated.jsonl").write_text(event_json(event) + "\n" + event_json(event)[:40])
    (folder / "wrong_shape.jsonl").write_text('{"event_id": "e1"}\n')
    simulated = CliRunner().invoke(
        main, ["simulate", str(folder / "tiny.toml"), "--out", str(folder / "tiny.lp")]
    )
    assert simulated.exit_code == 0, simulated.output
    return folder


@pytest.fixture
def places(inputs: Path, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """What the templates of a :class:`Mistake` name."""
    port = str(free_port())
    values = {"in": str(inputs), "tmp": str(tmp_path), "port": port}
    values["refused"] = f"http://127.0.0.1:{port}"
    (tmp_path / "collect.toml").write_text(
        f'[collect]\nenabled = ["host"]\nspool_dir = "{tmp_path / "spool"}"\n'
    )
    if request.node.get_closest_marker("influx"):
        values["url"] = request.getfixturevalue("influx").url
    return values


def _env(case: Mistake, values: dict[str, str], influx_token: str | None) -> dict[str, str]:
    """The case's environment: no InfluxDB settings but its own."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("REFLEX_")}
    if "REFLEX_INFLUXD" in os.environ:
        env["REFLEX_INFLUXD"] = os.environ["REFLEX_INFLUXD"]
    if influx_token is not None:
        env["REFLEX_INFLUX_TOKEN"] = influx_token
    env.update({name: value.format(**values) for name, value in case.env.items()})
    return env


def _run(case: Mistake, args: list[str], env: dict[str, str]) -> tuple[int, str, bool]:
    """Exit status, output, and whether an exception escaped the command."""
    if case.process:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "reflex_localize", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=PROCESS_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as expired:
            output = (expired.stdout or b"").decode() + (expired.stderr or b"").decode()
            return 0, f"(still running after {PROCESS_TIMEOUT_S} s)\n{output}", False
        return done.returncode, done.stdout + done.stderr, "Traceback" in done.stderr
    cleared = {name: None for name in os.environ if name.startswith("REFLEX_")}
    result = CliRunner().invoke(main, args, env={**cleared, **env}, catch_exceptions=True)
    if result.exception is None or isinstance(result.exception, SystemExit):
        return result.exit_code, result.output, False
    return result.exit_code, f"{result.output}(raised {result.exception!r})\n", True


def _said(output: str) -> list[str]:
    """The lines a user reads, besides click's usage reminder."""
    return [
        line
        for line in output.splitlines()
        if line.strip() and not line.startswith(("Usage: ", "Try '"))
    ]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, id=name, marks=[pytest.mark.influx] if case.influx else [])
        for name, case in MISTAKES.items()
    ],
)
def test_a_mistake_gets_one_line(
    case: Mistake, places: dict[str, str], request: pytest.FixtureRequest
) -> None:
    args = [arg.format(**places) for arg in case.args.split()]
    token = request.getfixturevalue("influx").token if case.influx else None
    status, output, escaped = _run(case, args, _env(case, places, token))
    said = _said(output)
    summary = f"exit {status}, {len(said)} lines, escaped={escaped}:\n{output[-3000:]}"
    assert status != 0, summary
    assert not escaped and "Traceback" not in output, summary
    assert len(said) <= MAX_LINES, summary
    for name in case.names.split(" | "):
        assert name.format(**places) in output, f"{name.format(**places)!r} not said; {summary}"
