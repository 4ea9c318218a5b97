"""The one set of InfluxDB options every ``reflex`` command takes, spelled the same in flags,
the environment and the config file (flags win over the environment, which wins over the file):

=================  ============================  ========================
flag               environment                   ``[influx]`` key
=================  ============================  ========================
``--config``       ``REFLEX_CONFIG``             (the file itself)
``--influx-url``   ``REFLEX_INFLUX_URL``         ``url``
``--org``          ``REFLEX_INFLUX_ORG``         ``org``
``--bucket``       ``REFLEX_INFLUX_BUCKET``      ``bucket``
``--token-file``   ``REFLEX_INFLUX_TOKEN_FILE``  ``token_file``
``--ca-cert``      ``REFLEX_INFLUX_CA_CERT``     ``ssl_ca_cert``
``--no-verify-tls``  ``REFLEX_INFLUX_VERIFY_SSL``  ``verify_ssl``
=================  ============================  ========================

The token itself is never a flag (command lines are visible to every user of the host):
``REFLEX_INFLUX_TOKEN`` or a mode-600 token file (:mod:`reflex_localize.influx.config`).

>>> @click.command()
... @influx_options
... def show(influx: InfluxOptions) -> None:
...     click.echo(influx.settings().url)
>>> from click.testing import CliRunner
>>> CliRunner().invoke(show, ["--influx-url", "http://db:8086"], env={}).output
'http://db:8086\\n'
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from reflex_localize.influx.config import Config, ConfigError, InfluxSettings, load_config

# flag parameter -> the environment variable it stands for (see influx.config.ENV_KEYS).
_FLAG_ENV = {
    "influx_url": "REFLEX_INFLUX_URL",
    "org": "REFLEX_INFLUX_ORG",
    "bucket": "REFLEX_INFLUX_BUCKET",
    "token_file": "REFLEX_INFLUX_TOKEN_FILE",
    "ca_cert": "REFLEX_INFLUX_CA_CERT",
}


@dataclass(frozen=True)
class InfluxOptions:
    """What the flags said; :meth:`settings` resolves them with the environment and file."""

    config_path: Path | None
    flags: Mapping[str, str]

    @property
    def env(self) -> dict[str, str]:
        """The environment with the flags applied: what a child process should inherit."""
        env = dict(os.environ)
        env.update(self.flags)
        if self.config_path is not None:
            env["REFLEX_CONFIG"] = str(self.config_path)
        return env

    def config(self) -> Config:
        return self._config

    @functools.cached_property
    def _config(self) -> Config:
        # Read once: the token file is opened, and a verify_ssl=false warning logged, once.
        try:
            return load_config(self.config_path, env=self.env)
        except ConfigError as error:
            raise click.ClickException(str(error)) from None

    def settings(self) -> InfluxSettings:
        return self.config().influx

    def require(self, what: str = "this command") -> InfluxSettings:
        """The settings, or a clear error when no URL, no http(s) URL or no token is configured."""
        settings = self.settings()
        if not settings.url:
            raise click.UsageError(f"{what} needs InfluxDB: --influx-url or REFLEX_INFLUX_URL")
        if not _is_http_url(settings.url):
            raise click.UsageError(
                f"InfluxDB URL {settings.url!r} (--influx-url, REFLEX_INFLUX_URL or [influx] url): "
                "expected http://HOST:PORT or https://HOST:PORT"
            )
        if not settings.token:
            raise click.UsageError(
                f"{what} needs a token: --token-file, REFLEX_INFLUX_TOKEN_FILE or "
                "REFLEX_INFLUX_TOKEN"
            )
        return settings

    def telemetry_instances(self) -> tuple[InfluxSettings, ...]:
        """The instances the flow reads telemetry from (:mod:`reflex_localize.influx.instances`),
        or a clear error for a table that is wrong or whose url is not http(s)."""
        from reflex_localize.influx.instances import telemetry_instances

        try:
            instances = telemetry_instances(self.config())
        except ConfigError as error:
            raise click.ClickException(str(error)) from None
        for number, settings in enumerate(instances, 1):
            if not _is_http_url(settings.url):
                raise click.UsageError(
                    f"InfluxDB URL {settings.url!r} (telemetry instance #{number}): "
                    "expected http://HOST:PORT or https://HOST:PORT"
                )
        return instances


def _is_http_url(url: str) -> bool:
    address = urlsplit(url)
    try:
        _ = address.port  # raises for a port that is not a number from 0 to 65535
    except ValueError:
        return False
    return address.scheme in ("http", "https") and bool(address.hostname)


URL_HELP = "InfluxDB URL [REFLEX_INFLUX_URL; [influx] url]."
URL_FLAG_ONLY_HELP = (
    "InfluxDB URL. Only this flag sets it here: REFLEX_INFLUX_URL and [influx] url are not read."
)


def influx_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the shared options to a click command, which receives them as ``influx``."""
    return _add_options(command, URL_HELP)


def influx_options_url_flag_only(command: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`influx_options` for a command that goes to InfluxDB only when ``--influx-url`` is
    given (``reflex demo``: simulated telemetry never reaches the database an agent's
    environment names); the other options resolve as everywhere."""
    return _add_options(command, URL_FLAG_ONLY_HELP)


def _add_options(command: Callable[..., Any], url_help: str) -> Callable[..., Any]:
    options = [
        click.option(
            "--config",
            "config_path",
            envvar="REFLEX_CONFIG",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Reflex TOML config ([influx] url, org, bucket, token_file, ssl_ca_cert).",
        ),
        click.option("--influx-url", help=url_help),
        click.option("--org", help="InfluxDB org [REFLEX_INFLUX_ORG; default reflex]."),
        click.option(
            "--bucket", help="Telemetry bucket [REFLEX_INFLUX_BUCKET; default telemetry]."
        ),
        click.option(
            "--token-file",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Token file, mode 600 [REFLEX_INFLUX_TOKEN_FILE]; or REFLEX_INFLUX_TOKEN.",
        ),
        click.option(
            "--ca-cert",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="CA certificate for InfluxDB's TLS [REFLEX_INFLUX_CA_CERT].",
        ),
        click.option(
            "--no-verify-tls",
            is_flag=True,
            help="Do not verify InfluxDB's TLS certificate (prefer --ca-cert).",
        ),
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = {
            _FLAG_ENV[name]: str(kwargs.pop(name))
            for name in list(_FLAG_ENV)
            if kwargs.get(name) is not None
        }
        for name in _FLAG_ENV:
            kwargs.pop(name, None)
        if kwargs.pop("no_verify_tls"):
            flags["REFLEX_INFLUX_VERIFY_SSL"] = "false"
        kwargs["influx"] = InfluxOptions(kwargs.pop("config_path"), flags)
        return command(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper
