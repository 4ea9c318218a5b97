"""A reader for the YAML that deploy/ is written in, so the manifests are checked without PyYAML
(not a dependency): block mappings and sequences, flow ``{...}`` and ``[...]``, quoted and plain
scalars (YAML 1.1 types, as Kubernetes reads them: ``0400`` is octal), ``|`` and ``>`` block
scalars, comments and ``---``. Anything else raises :class:`YamlError` naming the line, so a
construct it does not know can never be skipped in silence.

>>> load_all("a: {b: [1, 'x'], c: true}\\n---\\n- k: 0400\\n  s: |\\n    one\\n    two\\n")
[{'a': {'b': [1, 'x'], 'c': True}}, [{'k': 256, 's': 'one\\ntwo\\n'}]]
"""

from __future__ import annotations

import re
from typing import Any

_PLAIN_END = re.compile(r"\s+#.*$")


class YamlError(ValueError):
    pass


def load_all(text: str) -> list[Any]:
    docs: list[list[tuple[int, int, str]]] = [[]]
    for number, raw in enumerate(text.split("\n"), 1):
        if raw.rstrip() == "---":
            docs.append([])
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError(f"line {number}: a tab in the indentation")
        docs[-1].append((number, len(raw) - len(raw.lstrip(" ")), raw.rstrip()))
    out = []
    for lines in docs:
        reader = _Reader(lines)
        if reader.skip_blank():
            out.append(reader.block(reader.indent()))
            if reader.skip_blank():
                raise YamlError(f"line {reader.number()}: unexpected content")
    return out


class _Reader:
    def __init__(self, lines: list[tuple[int, int, str]]) -> None:
        self.lines, self.at = lines, 0

    def skip_blank(self) -> bool:
        while self.at < len(self.lines):
            text = self.lines[self.at][2].strip()
            if text and not text.startswith("#"):
                return True
            self.at += 1
        return False

    def indent(self) -> int:
        return self.lines[self.at][1]

    def number(self) -> int:
        return self.lines[self.at][0]

    def block(self, indent: int) -> Any:
        text = self.lines[self.at][2].strip()
        if text == "-" or text.startswith("- "):
            return self.sequence(indent)
        return self.mapping(indent)

    def sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while self.skip_blank() and self.indent() == indent:
            number, _, raw = self.lines[self.at]
            text = raw.strip()
            if not (text == "-" or text.startswith("- ")):
                break
            rest = text[1:].lstrip()
            if not rest or rest.startswith("#"):
                self.at += 1
                self.skip_blank()
                items.append(self.block(self.indent()))
            elif _key_of(rest) is not None and not rest.startswith(("{", "[", '"', "'")):
                # "- key: value": a mapping whose keys sit where this one's does.
                inner = indent + (len(text) - len(rest))
                self.lines[self.at] = (number, inner, " " * inner + rest)
                items.append(self.mapping(inner))
            else:
                self.at += 1
                items.append(self.value(rest, number, indent))
        return items

    def mapping(self, indent: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while self.skip_blank() and self.indent() == indent:
            number, _, raw = self.lines[self.at]
            text = raw.strip()
            split = _key_of(text)
            if split is None:
                raise YamlError(f"line {number}: expected 'key: value', got {text[:60]!r}")
            key, rest = split
            if key in out:
                raise YamlError(f"line {number}: {key!r} twice")
            self.at += 1
            if not rest or rest.startswith("#"):
                if self.skip_blank() and self.indent() > indent:
                    out[key] = self.block(self.indent())
                elif self.skip_blank() and self.indent() == indent and self._dash():
                    out[key] = self.sequence(indent)  # a sequence may sit at its key's indent
                else:
                    out[key] = None
            else:
                out[key] = self.value(rest, number, indent)
        if self.skip_blank() and self.indent() > indent:
            raise YamlError(f"line {self.number()}: unexpected indentation")
        return out

    def _dash(self) -> bool:
        text = self.lines[self.at][2].strip()
        return text == "-" or text.startswith("- ")

    def value(self, text: str, number: int, indent: int) -> Any:
        if text[0] in "|>":
            return self.block_scalar(text, number, indent)
        if text[0] in "{[":
            parsed, end = _flow(text, 0, number)
            if _PLAIN_END.sub("", text[end:]).strip():
                raise YamlError(f"line {number}: text after a flow collection")
            return parsed
        return _scalar(_strip_comment(text), number)

    def block_scalar(self, head: str, number: int, indent: int) -> str:
        style, chomp = head[0], head[1:].split("#")[0].strip()
        if chomp not in ("", "-", "+"):
            raise YamlError(f"line {number}: block scalar header {head!r}")
        body: list[str] = []
        inner = None
        while self.at < len(self.lines):
            _, ind, raw = self.lines[self.at]
            if raw.strip() and ind <= indent:
                break
            if raw.strip() and inner is None:
                inner = ind
            body.append(raw[inner:] if inner is not None and raw.strip() else "")
            self.at += 1
        while body and not body[-1]:
            body.pop()
        text = "\n".join(body) if style == "|" else " ".join(line for line in body if line)
        return text if chomp == "-" else text + "\n"


def _key_of(text: str) -> tuple[str, str] | None:
    if text[0] in "\"'":
        end = text.find(text[0], 1)
        key, rest = text[1:end], text[end + 1 :]
        return (key, rest[1:].strip()) if rest.startswith(":") else None
    match = re.match(r"([^\s:{}\[\],#][^:]*?):(?:\s+(.*)|$)", text)
    return (match.group(1), (match.group(2) or "").strip()) if match else None


def _strip_comment(text: str) -> str:
    return text if text[0] in "\"'" else _PLAIN_END.sub("", text)


def _flow(text: str, at: int, number: int) -> tuple[Any, int]:
    opening = text[at]
    closing = "}" if opening == "{" else "]"
    out: Any = {} if opening == "{" else []
    at += 1
    while True:
        at = _skip_space(text, at)
        if at >= len(text):
            raise YamlError(f"line {number}: unclosed {opening}")
        if text[at] == closing:
            return out, at + 1
        if opening == "{":
            key_end = text.index(":", at)
            key = _scalar(text[at:key_end].strip(), number)
            item, at = _flow_item(text, key_end + 1, number, closing)
            out[str(key)] = item
        else:
            item, at = _flow_item(text, at, number, closing)
            out.append(item)
        at = _skip_space(text, at)
        if at < len(text) and text[at] == ",":
            at += 1


def _flow_item(text: str, at: int, number: int, closing: str) -> tuple[Any, int]:
    at = _skip_space(text, at)
    if text[at] in "{[":
        return _flow(text, at, number)
    if text[at] in "\"'":
        end = text.index(text[at], at + 1)
        return _scalar(text[at : end + 1], number), end + 1
    end = at
    while end < len(text) and text[end] not in "," + closing:
        end += 1
    return _scalar(text[at:end].strip(), number), end


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] == " ":
        at += 1
    return at


def _scalar(text: str, number: int) -> Any:
    if text[:1] == '"':
        if not text.endswith('"') or len(text) < 2:
            raise YamlError(f"line {number}: unclosed string {text[:40]!r}")
        return bytes(text[1:-1], "utf-8").decode("unicode_escape")
    if text[:1] == "'":
        if not text.endswith("'") or len(text) < 2:
            raise YamlError(f"line {number}: unclosed string {text[:40]!r}")
        return text[1:-1].replace("''", "'")
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    if text in ("null", "~", ""):
        return None
    if re.fullmatch(r"0[0-7]+", text):
        return int(text, 8)
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?\d*\.\d+", text):
        return float(text)
    return text
