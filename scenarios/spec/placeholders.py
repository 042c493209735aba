"""Placeholders in the words of a `traffic.command` tool: `{port}` is filled in for each run.

`{{` and `}}` stand for a literal brace, as in Python's str.format, so that a
word such as curl's `-w '%{time_total}'` can be written (`%{{time_total}}`).
A single brace that opens or closes no placeholder is refused rather than
guessed at: `{{x}` could mean `{x}` or `{` and `x}`.
"""
from __future__ import annotations

import re

NAMES = ("server_ip", "client_ip", "port", "duration", "bytes", "interval")
PATH_NAMES = ("server_ip", "client_ip")   # the only ones with a per-path form, {server_ip:B}

# an escaped brace, a placeholder, or a brace on its own (tried in this order at each position)
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_ESCAPES = {"{{": "{", "}}": "}"}


def placeholders(word: str) -> list[str]:
    """The placeholders of a word, without their braces ('server_ip:B'); escaped braces are not ones."""
    return [m.group(1) for m in _TOKEN.finditer(word) if m.group(1) is not None]


def word_problem(word: str) -> str | None:
    """What is wrong with a word's braces or placeholder names, regardless of the scenario's paths."""
    for m in _TOKEN.finditer(word):
        name = m.group(1)
        if name is None:
            if m.group(0) not in _ESCAPES:
                return (f"a single {m.group(0)} in {word!r} opens or closes no placeholder; "
                        "write {{ or }} for a literal brace")
            continue
        base, colon, path = name.partition(":")
        if base not in NAMES:
            return (f"unknown placeholder {{{name}}} in {word!r} "
                    f"(known: {', '.join('{' + p + '}' for p in NAMES)}, and {{server_ip:PATH}} / "
                    "{client_ip:PATH}; write {{ and }} for a literal brace)")
        if colon and base not in PATH_NAMES:
            return (f"{{{name}}} in {word!r}: only {{server_ip:PATH}} and {{client_ip:PATH}} name a path "
                    f"(use {{{base}}})")
    return None


def fill(word: str, values: dict[str, str]) -> str:
    """The word with its placeholders replaced by `values` and its escaped braces made single."""
    def one(m: re.Match) -> str:
        return values[m.group(1)] if m.group(1) is not None else _ESCAPES.get(m.group(0), m.group(0))
    return _TOKEN.sub(one, word)
