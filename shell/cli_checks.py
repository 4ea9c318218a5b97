"""Checks at the door, shared by the ``reflex`` commands, so that a user's mistake ends in one
line that says what and where, never in a traceback (those are for bugs).

- A bad option value is a usage error (exit 2): ranges (:data:`POSITIVE_SECONDS`, ...), files
  to read (:data:`INPUT_FILE`), files and folders to write (:class:`OutputPath`), scenarios
  (:class:`ScenarioName`), ``host:port`` (:class:`HostPort`), the lines of a JSONL file
  (:func:`read_json_lines`).
- A refusal met while working is a :class:`click.ClickException` (exit 1): InfluxDB refusing
  the token or not answering (:func:`check_token`, :func:`influx_refusals`).

>>> @click.command()
... @click.option("--window", type=POSITIVE_SECONDS)
... @click.option("--out", type=OUTPUT_FILE)
... def show(window: float, out: Path) -> None: ...
>>> from click.testing import CliRunner
>>> CliRunner().invoke(show, ["--window", "0"]).output.splitlines()[-1]
"Error: Invalid value for '--window': 0.0 is not in the range x>0."
>>> CliRunner().invoke(show, ["--out", "/no/such/folder/x"]).output.splitlines()[-1]
"Error: Invalid value for '--out': /no/such/folder/x: no such directory /no/such/folder"
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from reflex_localize.influx.config import InfluxSettings

T = TypeVar("T")

AT_LEAST_ONE = click.IntRange(min=1)
NOT_NEGATIVE = click.IntRange(min=0)  # seeds, indexes, nanosecond times


class FiniteRange(click.FloatRange):
    """A FloatRange that refuses nan and inf, which pass its comparisons (nan > 0 is false,
    so is nan <= 0) and then break every window the flow computes."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number", param, ctx)
        return number


POSITIVE_SECONDS = FiniteRange(min=0, min_open=True)
NOT_NEGATIVE_SECONDS = FiniteRange(min=0)
PORT = click.IntRange(1, 65535)
INPUT_FILE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)
INFLUXD = click.Path(exists=True, dir_okay=False, executable=True, path_type=Path)
PROBE_TIMEOUT_S = 5.0  # check_token's one request


class OutputPath(click.ParamType):
    """A file (or, with ``folder``, a directory) a command writes: checked before any work,
    so that a long run does not end in a traceback. A file's directory must exist; a
    directory is created with its parents, so its nearest existing ancestor must be a
    writable directory."""

    def __init__(self, *, folder: bool) -> None:
        self.folder = folder
        self.name = "directory" if folder else "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(value)
        problem = output_problem(path, folder=self.folder)
        if problem:
            self.fail(f"{path}: {problem}", param, ctx)
        return path


OUTPUT_FILE = OutputPath(folder=False)
OUTPUT_FOLDER = OutputPath(folder=True)


class Duration(click.ParamType):
    """A span such as ``90m``, ``24h`` or ``7d`` (``s``, ``m``, ``h``, ``d``), in seconds.

    >>> Duration().convert("7d", None, None), Duration().convert("90m", None, None)
    (604800.0, 5400.0)
    """

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        number, unit = text[:-1], _SECONDS_PER.get(text[-1:])
        try:
            seconds = float(number) * unit if unit is not None else float("nan")
        except ValueError:
            seconds = float("nan")
        if not seconds > 0:  # also NaN: not a number with a unit
            self.fail(f"{text!r} is not a duration such as 90m, 24h or 7d", param, ctx)
        return seconds


_SECONDS_PER = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DURATION = Duration()


# Kernel interfaces mounted as files: root may "write" there (os.access says yes), and a line of
# telemetry written to /sys/power/state is no output but an order.
_PSEUDO_FILESYSTEMS = frozenset((
    "sysfs", "proc", "devpts", "securityfs", "cgroup", "cgroup2", "debugfs", "tracefs",
    "configfs", "pstore", "bpf", "efivarfs", "fusectl", "mqueue", "hugetlbfs", "binfmt_misc",
    "autofs", "rpc_pipefs", "nsfs",
))  # fmt: skip


def pseudo_filesystem(path: Path, mounts: Path = Path("/proc/self/mounts")) -> str | None:
    """The type of the kernel filesystem ``path`` lies on (sysfs, proc...), or None."""
    try:
        table = mounts.read_text().splitlines()
    except OSError:
        return None
    target = str(path.absolute().resolve())
    best, kind = "", ""
    for row in table:
        fields = row.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind if kind in _PSEUDO_FILESYSTEMS else None


def output_problem(path: Path, *, folder: bool) -> str | None:
    """Why ``path`` cannot be written as a file (or a directory), or None."""
    pseudo = pseudo_filesystem(path)
    if pseudo is not None:
        return f"is on {pseudo}, a kernel interface, not a place for output"
    if path.exists():
        if folder != path.is_dir():
            return "is a directory, not a file" if path.is_dir() else "is a file, not a directory"
        return None if os.access(path, os.W_OK) else "cannot be written (permission denied)"
    if folder:  # created with its parents
        where = next(p for p in path.absolute().parents if p.exists())
    else:
        where = path.absolute().parent
        if not where.exists():
            return f"no such directory {path.parent}"
    if not where.is_dir():
        return f"{where} is a file, not a directory"
    return None if os.access(where, os.W_OK | os.X_OK) else f"cannot write in {where}"


def check_output(path: Path, option: str, *, folder: bool) -> None:
    """:class:`OutputPath`'s check, for an option that is written only in some runs."""
    problem = output_problem(path, folder=folder)
    if problem:
        raise click.BadParameter(f"{path}: {problem}", param_hint=f"'{option}'")


def input_problem(path: Path, *, regular: bool = False) -> str | None:
    """Why ``path`` cannot be read as a file, or None. ``regular``: only a regular file will
    do (a replay reads to the end: ``/dev/zero`` has none, a FIFO may never close)."""
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "is a directory, not a file"
    if regular and not path.is_file():
        kind = "a FIFO" if stat.S_ISFIFO(path.stat().st_mode) else "a device or socket"
        return f"is {kind}, not a regular file: replay a file (a capture, `reflex simulate --out`)"
    return None if os.access(path, os.R_OK) else "cannot be read (permission denied)"


class ReplayFile(click.ParamType):
    """A line-protocol file to replay: an existing, readable, regular file."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(value)
        problem = input_problem(path, regular=True)
        if problem:
            self.fail(f"{path}: {problem}", param, ctx)
        return path


REPLAY_FILE = ReplayFile()


class ScenarioName(click.ParamType):
    """A simulator scenario, by library name or ``.toml`` path, that loads and builds."""

    name = "scenario"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        problem = scenario_problem(str(value))
        if problem:
            self.fail(problem, param, ctx)
        return str(value)


SCENARIO = ScenarioName()


def scenario_problem(name: str) -> str | None:
    """Why the scenario ``name`` cannot be simulated, in a line that names it, or None. The
    loader names the file and the key of what it refuses; the simulation is built too (tens
    of milliseconds), since the loader leaves fault types to the simulator."""
    from reflex_localize.simulator import Simulation, load_scenario
    from reflex_localize.simulator.scenario import ScenarioError

    try:
        scenario = load_scenario(name)
    except KeyError as error:  # "no scenario 'x'; known: ..."
        return str(error.args[0]) if error.args else f"no scenario {name!r}"
    except ScenarioError as error:
        return str(error)
    except (OSError, ValueError) as error:  # the file itself: a directory, not UTF-8
        return f"{name}: {short_reason(error)}"
    try:
        Simulation(scenario, seed=0)
    except ValueError as error:  # a fault type the simulator does not know
        return f"{name}: {error}"
    return None


class HostPort(click.ParamType):
    """``HOST:PORT``, as ``(host, port)``; an empty host is 127.0.0.1."""

    name = "host:port"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int]:
        if isinstance(value, tuple):
            return value
        try:
            return host_port(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


def host_port(value: str) -> tuple[str, int]:
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{value!r}: expected HOST:PORT with a port from 1 to 65535")
    return host or "127.0.0.1", int(port)


def read_json_lines(path: Path, option: str, what: str, parse: Callable[[str], T]) -> list[T]:
    """Each non-blank line of a JSONL file through ``parse``; a file or line it cannot take
    stops the command with the option, the file, the line number and why."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise click.BadParameter(
            f"{path}: {short_reason(error)}", param_hint=f"'{option}'"
        ) from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(parse(line))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise click.BadParameter(
                f"{path}, line {number}: not {what}: {short_reason(error)}",
                param_hint=f"'{option}'",
            ) from None
    return rows


def short_reason(error: BaseException) -> str:
    """One short line for what a parser or a file system said."""
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON ({error.msg}, column {error.colno})"
    if isinstance(error, KeyError):
        return f"no {error.args[0]!r}" if error.args else "a key is missing"
    if isinstance(error, OSError):
        return (error.strerror or type(error).__name__).lower()
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def check_token(settings: InfluxSettings, *, service: bool = False) -> None:
    """Asks InfluxDB once whether it takes the token (any valid token may list the buckets it
    sees), so that a wrong one stops the command at its start, in one line. A ``service`` (the
    agent, the flow) waits for InfluxDB anyway: anything but a refused token is a warning."""
    from influxdb_client.rest import ApiException
    from urllib3.exceptions import HTTPError

    from reflex_localize.influx.connection import connect

    try:
        with connect(settings, timeout_s=PROBE_TIMEOUT_S) as client:
            client.buckets_api().find_buckets(limit=1)
        return
    except ApiException as error:
        problem = influx_answer(settings.url, error.status, _message(error))
        if error.status in (401, 403):
            raise click.ClickException(problem) from None
    except HTTPError as error:
        problem = unreachable(settings.url, error)
    if not service:
        raise click.ClickException(problem)
    click.echo(f"warning: {problem}; going on, waiting for it", err=True)


@contextmanager
def influx_refusals(url: str) -> Iterator[None]:
    """Turns InfluxDB's refusals into one line: its HTTP answer (a refused token among them),
    a writer's refusal, or no answer at all. Only the status and the server's short message
    are shown: a request's repr or headers could carry the token."""
    from influxdb_client.rest import ApiException
    from urllib3.exceptions import HTTPError

    from reflex_localize.influx.writer import WriterError

    try:
        yield
    except ApiException as error:
        raise click.ClickException(influx_answer(url, error.status, _message(error))) from None
    except WriterError as error:
        raise click.ClickException(str(error)) from None
    except HTTPError as error:
        raise click.ClickException(unreachable(url, error)) from None


def influx_answer(url: str, status: int | None, message: str) -> str:
    """What InfluxDB's HTTP error answer means for the user.

    >>> influx_answer("http://db:8086", 401, "unauthorized access")
    'InfluxDB answered HTTP 401 at http://db:8086: the token was refused (unauthorized access)'
    """
    if status in (401, 403):
        return f"InfluxDB answered HTTP {status} at {url}: the token was refused ({message})"
    return f"InfluxDB answered HTTP {status} at {url}: {message}"


def unreachable(url: str, error: BaseException) -> str:
    """A urllib3 error as the user reads it: no connection, no such name, a timeout, TLS."""
    return f"cannot reach InfluxDB at {url}: {_why(error)}"


def _message(error: Any) -> str:
    """The server's short message (InfluxDB answers ``{"code": ..., "message": ...}``)."""
    return str(getattr(error, "message", None) or error.reason or "no reason given")[:300]


def _why(error: BaseException) -> str:
    """The operating system's reason under a urllib3 error (refused, no such name, TLS)."""
    from urllib3.exceptions import TimeoutError as Urllib3Timeout

    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return str(cause.strerror)
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, Urllib3Timeout):
        return "no answer in time"
    return type(error).__name__
