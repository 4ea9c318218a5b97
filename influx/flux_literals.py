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
from collections.abc import Mapping, Sequence
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


# Up to this many terms a predicate stays one flat chain, as a reader of a dashboard query
# writes it; beyond, a flat chain soon fails to compile ("Program is nested too deep" at
# 1,000: a large job's nodes), so the terms are paired into a balanced tree.
FLAT_TERMS = 64


def flux_any_of(column: str, values: Sequence[str]) -> str:
    """A Flux predicate true where ``column`` is one of ``values`` (false for none): equality
    tests joined by ``or``, which InfluxDB pushes down to storage (``contains`` it does not).
    Two or more are parenthesized, so the predicate can stand beside ``and``.

    >>> flux_any_of("r.node", ["a", "b", "c"])
    '(r.node == "a" or r.node == "b" or r.node == "c")'
    >>> flux_any_of("r.node", [])
    'false'
    """
    terms = [f"{column} == {flux_string(value)}" for value in values]
    if not terms:
        return "false"
    if len(terms) <= FLAT_TERMS:
        return terms[0] if len(terms) == 1 else "(" + " or ".join(terms) + ")"
    while len(terms) > 1:
        pairs = [terms[i : i + 2] for i in range(0, len(terms), 2)]
        terms = [f"({pair[0]} or {pair[1]})" if len(pair) == 2 else pair[0] for pair in pairs]
    return terms[0]


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
