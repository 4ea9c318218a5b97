"""Reads and rewrites the parameter lines of a Flux script (``name = literal`` at line start).

Alert tasks and cookbook queries run as they are, with defaults; installing a task or
answering a question rewrites only these lines, so the checked-in text stays valid Flux.

>>> set_params('x = 1\\ny = "a"\\nx + 1', {"y": "b c", "x": 5})
'x = 5\\ny = "b c"\\nx + 1'
>>> flux_literal(90), flux_literal(Duration("5m")), flux_string('a"${b}')
('90', '5m', '"a\\\\"\\\\${b}"')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Duration:
    """A Flux duration literal such as ``5m``."""

    text: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"-?(\d+(ns|us|ms|s|m|h|d|w|mo|y))+", self.text):
            raise ValueError(f"{self.text!r} is not a Flux duration")


FluxValue = str | int | float | Duration | list[int] | list[str]


def flux_literal(value: FluxValue) -> str:
    if isinstance(value, Duration):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(flux_literal(item) for item in value) + "]"
    if isinstance(value, str):
        return flux_string(value)
    return repr(value)


def flux_string(text: str) -> str:
    """A Flux string literal; ``${`` is escaped so that nothing is interpolated."""
    if any(ord(char) < 0x20 for char in text):
        raise ValueError("control characters cannot be Flux parameters")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    return f'"{escaped}"'


def _line(name: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(name)} = .*$", re.MULTILINE)


def set_params(flux: str, values: Mapping[str, FluxValue]) -> str:
    """``flux`` with each named parameter line set; a name without its line is an error."""
    for name, value in values.items():
        line = f"{name} = {flux_literal(value)}".replace("\\", "\\\\")
        flux, found = _line(name).subn(line, flux)
        if found != 1:
            raise KeyError(f"the script has {found} parameter lines for {name!r}, not 1")
    return flux
