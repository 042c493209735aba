"""Descriptive statistics and t-based confidence intervals, without SciPy.

Confidence intervals use Student's t (two-sided 95 %), and Welch's interval
for the difference of two means; with one value there is no interval, which
the verdicts treat as "inconclusive", never as a pass.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

# Two-sided 95 % critical values of Student's t, by degrees of freedom.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
         18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
         26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


Z975 = 1.959963984540054


def t975(df: float) -> float:
    """Critical t for a 95 % two-sided interval; non-integer df (Welch) rounds down, which is conservative.

    Up to 30 degrees of freedom from the table; beyond, the Cornish-Fisher expansion of t around the
    normal quantile (within 0.001 of the table at 40, 60 and 120, and tending to 1.95996, never below).
    """
    if df < 1:
        return math.inf
    d = int(math.floor(df))
    if d <= 30:
        return _T975[d]
    z = Z975
    return (z + (z ** 3 + z) / (4 * d) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * d ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * d ** 3))


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    q1: float
    q3: float
    min: float
    max: float
    stdev: float | None
    ci_low: float | None
    ci_high: float | None
    ci_clipped: bool = False   # the t interval reached below what the metric can be, and was cut there

    def to_dict(self) -> dict:
        return asdict(self)


def describe(values: list[float], floor: float | None = None) -> Summary:
    """n, mean, quartiles and the t-based 95 % interval of the mean; `floor`: the least value the
    metric can take (0 for counts and rates), where the interval is cut, and says so."""
    if not values:
        raise ValueError("no values")
    xs = sorted(float(v) for v in values)
    n = len(xs)
    mean = statistics.fmean(xs)
    if n >= 2:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        sd = statistics.stdev(xs)
        half = t975(n - 1) * sd / math.sqrt(n)
        lo, hi = mean - half, mean + half
    else:
        q1 = q3 = xs[0]
        sd = lo = hi = None
    clipped = floor is not None and lo is not None and lo < floor
    return Summary(n=n, mean=mean, median=statistics.median(xs), q1=q1, q3=q3, min=xs[0], max=xs[-1],
                   stdev=sd, ci_low=floor if clipped else lo, ci_high=hi, ci_clipped=clipped)


def diff_ci(a: list[float], b: list[float], factor: float = 1.0) -> tuple[float, float | None, float | None]:
    """Welch 95 % interval of mean(a) - factor * mean(b): (estimate, low, high); None bounds if n < 2."""
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    est = ma - factor * mb
    if len(a) < 2 or len(b) < 2:
        return est, None, None
    va = statistics.variance(a) / len(a)
    vb = factor * factor * statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return est, est, est
    df = (va + vb) ** 2 / ((va * va / (len(a) - 1) if va else 0) + (vb * vb / (len(b) - 1) if vb else 0))
    half = t975(df) * se
    return est, est - half, est + half


def const_ci(a: list[float], const: float) -> tuple[float, float | None, float | None]:
    """95 % interval of mean(a) - const."""
    s = describe(a)
    if s.ci_low is None:
        return s.mean - const, None, None
    return s.mean - const, s.ci_low - const, s.ci_high - const
