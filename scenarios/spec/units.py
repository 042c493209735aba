"""Parsing of the human units used in scenario files.

Scenario files are written by hand, so every quantity carries an explicit,
checked unit: a bare `delay: 15` is an error rather than a guess.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(kbit|mbit|gbit)(?:/s|ps)?\s*$", re.IGNORECASE)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)?\s*$", re.IGNORECASE)

_DURATION_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
_RATE_MBIT = {"kbit": 0.001, "mbit": 1.0, "gbit": 1000.0}
# Sizes are bytes, whatever the case: '10Mb' is ten megabytes, not megabits (docs/scenario-format.md)
_SIZE_BYTES = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_duration_ms(value: object) -> float:
    """'15ms', '0.25s', '500us' -> milliseconds. Bare numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"needs a unit, e.g. '15ms' or '0.25s' (got {value!r})")
    m = _DURATION.match(value)
    if not m:
        raise ValueError(f"is not a duration like '15ms', '0.25s' or '500us' (got {value!r})")
    return float(m.group(1)) * _DURATION_MS[m.group(2)]


def parse_rate_mbit(value: object) -> float:
    """A number is Mbit/s; a string may carry kbit, Mbit or Gbit ('700kbit')."""
    if isinstance(value, bool):
        raise ValueError(f"must be a rate in Mbit/s (got {value!r})")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"must be a finite number in Mbit/s (got {value!r})")
        return float(value)
    if isinstance(value, str):
        m = _RATE.match(value)
        if m:
            unit = m.group(2).lower()
            # divide for kbit so '700kbit' is exactly 0.7, not 0.7000000000000001
            return float(m.group(1)) / 1000 if unit == "kbit" else float(m.group(1)) * _RATE_MBIT[unit]
    raise ValueError(f"must be a number in Mbit/s or a string like '700kbit' (got {value!r})")


MAX_SIZE_BYTES = 10**12   # 1 TB: beyond it a transfer is a typo (a 30-digit integer was accepted)


def parse_size_bytes(value: object) -> int:
    """10000000, '10MB' (10^6) or '10MiB' (2^20) -> bytes, a whole number of them, at most 1 TB."""
    if isinstance(value, bool):
        raise ValueError(f"must be a size such as '10MB' (got {value!r})")
    if isinstance(value, float):   # e.g. from a sweep's range with a fractional step
        raise ValueError(f"must be a whole number of bytes, or a size such as '10MB' (got {value!r})")
    size = None
    if isinstance(value, int):
        size = value
    elif isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            # Decimal, not float: '1.000000000001TB' is 10^12 + 1 bytes, one over the limit, not 10^12
            exact = Decimal(m.group(1)) * _SIZE_BYTES[(m.group(2) or "b").lower()]
            if exact != exact.to_integral_value():
                raise ValueError(f"must be a whole number of bytes (got {value!r}, {exact.normalize():f} bytes)")
            size = int(exact)
    if size is None:
        raise ValueError(f"must be a size such as 10000000, '10MB' or '10MiB' (units b, kB, MB, GB, TB, KiB, "
                         f"MiB, GiB, TiB, in any case) (got {value!r})")
    if size > MAX_SIZE_BYTES:
        in_bytes = f", {size} bytes" if isinstance(value, str) else ""
        raise ValueError(f"must be at most 1TB, {MAX_SIZE_BYTES} bytes (got {value!r}{in_bytes})")
    return size


def format_ms(ms: float) -> str:
    """Milliseconds as tc wants them, without float noise ('15ms', '0.5ms')."""
    return f"{ms:g}ms"


def format_mbit(mbit: float) -> str:
    """Rate as tc wants it; kbit keeps sub-Mbit rates exact."""
    kbit = mbit * 1000
    if abs(kbit - round(kbit)) < 1e-9:
        return f"{int(round(kbit))}kbit"
    return f"{kbit:g}kbit"
