"""Reflex configuration: one TOML file plus the environment, the environment winning.

Every component reads the ``[influx]`` section through :class:`InfluxSettings` and its own
section through :func:`section_as`, which checks each key against a frozen dataclass, so a
typo or a wrong type fails at start and names the key and the file.

Tokens come from ``REFLEX_INFLUX_TOKEN``, or from a file named by ``REFLEX_INFLUX_TOKEN_FILE``
or ``[influx] token_file``, never from the TOML file itself (config files get copied,
committed and pasted into tickets). A token file readable by group or others is refused.
No repr or error message ever contains a token.

>>> from pathlib import Path
>>> config = load_config(None, env={"REFLEX_INFLUX_URL": "http://127.0.0.1:8086",
...     "REFLEX_INFLUX_TOKEN": "s3cret", "REFLEX_CLUSTER": "c1", "REFLEX_NODE": "n1"})
>>> config.influx.url, config.identity.cluster
('http://127.0.0.1:8086', 'c1')
>>> "s3cret" in repr(config)
False
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import stat
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
_log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the key and its source."""


@dataclass(frozen=True)
class InfluxSettings:
    """Where and how to write: the arguments of ``reflex_localize.influx.writer.Writer``."""

    url: str = ""
    org: str = "reflex"
    bucket: str = "telemetry"
    token: str = field(default="", repr=False)
    token_file: str = ""
    timeout_s: float = 10.0
    batch_size: int = 5000
    verify_ssl: bool = True
    ssl_ca_cert: str = ""

    @property
    def configured(self) -> bool:
        return bool(self.url)


@dataclass(frozen=True)
class Identity:
    """Who is reporting: the ``cluster`` and ``node`` tags of every point, and where the node
    sits: ``rack`` and ``switch``, site tags the agent adds to every point when set."""

    cluster: str = "default"
    node: str = ""
    rack: str = ""
    switch: str = ""

    @property
    def site(self) -> dict[str, str]:
        """The site tags that are set."""
        return {name: value for name, value in (("rack", self.rack), ("switch", self.switch))
                if value}  # fmt: skip


@dataclass(frozen=True)
class Config:
    """The whole file, with ``sections`` kept raw for components that read their own."""

    path: Path | None
    influx: InfluxSettings
    identity: Identity
    sections: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def section(self, name: str, cls: type[T]) -> T:
        """The ``[name]`` section as a ``cls`` dataclass (its defaults when absent)."""
        return section_as(self.sections.get(name, {}), cls, where=_where(self.path, name))


# Environment variables and the (section, key) they override.
ENV_KEYS: dict[str, tuple[str, str]] = {
    "REFLEX_INFLUX_URL": ("influx", "url"),
    "REFLEX_INFLUX_ORG": ("influx", "org"),
    "REFLEX_INFLUX_BUCKET": ("influx", "bucket"),
    "REFLEX_INFLUX_TOKEN_FILE": ("influx", "token_file"),
    "REFLEX_INFLUX_CA_CERT": ("influx", "ssl_ca_cert"),
    "REFLEX_INFLUX_VERIFY_SSL": ("influx", "verify_ssl"),
    "REFLEX_CLUSTER": ("identity", "cluster"),
    "REFLEX_NODE": ("identity", "node"),
    "REFLEX_RACK": ("identity", "rack"),
    "REFLEX_SWITCH": ("identity", "switch"),
}


def load_config(path: Path | str | None, env: Mapping[str, str] | None = None) -> Config:
    """Reads ``path`` (optional) and overlays the environment; raises ConfigError."""
    env = os.environ if env is None else env
    file_path = Path(path) if path is not None else None
    raw = _read_toml(file_path) if file_path is not None else {}
    if "token" in raw.get("influx", {}):
        raise ConfigError(
            f"{_where(file_path, 'influx')}.token: tokens are not read from the config file; "
            "use token_file or REFLEX_INFLUX_TOKEN"
        )
    merged: dict[str, dict[str, Any]] = {
        name: dict(value) for name, value in raw.items() if isinstance(value, dict)
    }
    for variable, (section, key) in ENV_KEYS.items():
        if env.get(variable):
            merged.setdefault(section, {})[key] = env[variable]
    influx = section_as(merged.get("influx", {}), InfluxSettings, where=_where(file_path, "influx"))
    influx = dataclasses.replace(influx, token=_token(influx, env, file_path))
    if not influx.verify_ssl:
        _log.warning(
            "%s.verify_ssl = false: TLS certificates of %s are NOT verified; anyone on the "
            "path can read the token and the data. Prefer ssl_ca_cert = <your CA file>",
            _where(file_path, "influx"),
            influx.url or "InfluxDB",
        )
    identity = section_as(merged.get("identity", {}), Identity, where=_where(file_path, "identity"))
    if not identity.node:
        identity = dataclasses.replace(identity, node=socket.gethostname())
    # Arrays of tables ([[telemetry_instances]]) are kept as they are, for whoever reads them.
    arrays = {name: value for name, value in raw.items() if isinstance(value, list)}
    return Config(file_path, influx, identity, {**arrays, **merged})


def section_as(values: Mapping[str, Any], cls: type[T], *, where: str) -> T:
    """Builds dataclass ``cls`` from a TOML table, checking names and types of every key."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a table")
    declared = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in declared:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(sorted(declared))})")
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Checks one value against a simple annotation; env strings are converted where clear."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        errors = []
        for option in typing.get_args(hint):
            if option is type(None):
                continue
            try:
                return _coerce(value, option, where)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(errors[0] if errors else f"{where}: unsupported type")
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        (item_hint, *_) = typing.get_args(hint) or (Any,)
        return tuple(_coerce(item, item_hint, where) for item in value)
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a table, got {type(value).__name__}")
        args = typing.get_args(hint)
        value_hint = args[1] if len(args) == 2 else Any
        return {str(k): _coerce(v, value_hint, f"{where}.{k}") for k, v in value.items()}
    return _scalar(value, hint, where)


def _scalar(value: Any, hint: Any, where: str) -> Any:
    if hint is Any:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint is Path:
        if isinstance(value, str | Path):
            return Path(value)
    else:
        raise ConfigError(f"{where}: unsupported setting type {hint!r}")
    name = getattr(hint, "__name__", str(hint))
    raise ConfigError(f"{where}: expected {name}, got {type(value).__name__} {value!r}")


def _token(settings: InfluxSettings, env: Mapping[str, str], file_path: Path | None) -> str:
    if env.get("REFLEX_INFLUX_TOKEN"):
        return env["REFLEX_INFLUX_TOKEN"].strip()
    if not settings.token_file:
        return ""
    source = (
        "REFLEX_INFLUX_TOKEN_FILE"
        if env.get("REFLEX_INFLUX_TOKEN_FILE")
        else f"{_where(file_path, 'influx')}.token_file"
    )
    return read_token_file(Path(settings.token_file), source)


def read_token_file(path: Path, source: str = "token_file") -> str:
    """The token in ``path``, refusing a file that group or others can read, and in one line
    anything that is not a small, readable text file (a FIFO would hang the reader)."""
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise ConfigError(f"{source}: cannot read token file {path}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{source}: token file {path} is not a regular file")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{source}: token file {path} is readable by group or others "
            f"(mode {stat.S_IMODE(mode):o}); chmod 600 it"
        )
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_TOKEN_BYTES + 1)
    except OSError as error:  # another user's file, or an unreadable disk
        raise ConfigError(f"{source}: cannot read token file {path}: {error.strerror}") from None
    token = raw.strip()
    if not token:
        raise ConfigError(f"{source}: token file {path} is empty")
    if len(raw) > _MAX_TOKEN_BYTES or not token.isascii() or not token.decode().isprintable():
        raise ConfigError(f"{source}: token file {path} does not hold a token (one line of text)")
    return token.decode()


_MAX_TOKEN_BYTES = 4096  # an InfluxDB token is 88 characters


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read config file: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None


def _where(path: Path | None, section: str) -> str:
    return f"{path}: [{section}]" if path is not None else f"[{section}]"
