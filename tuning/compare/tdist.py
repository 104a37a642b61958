"""Student's t distribution without SciPy: the CDF through the regularized incomplete beta
function (Lentz's continued fraction) and the quantile by Newton's method on it. Fractional degrees
of freedom work (Welch's), and so does any confidence level, which the sequential rule needs
(99 %, 99.5 %, ...). Accurate to ~1e-10 in the CDF and ~1e-12 relative in the quantile."""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

_EPS = 1e-15
_TINY = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def _reg_inc_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` (> 0, may be fractional) degrees of freedom."""
    if math.isinf(df):
        return NormalDist().cdf(t)
    tail = 0.5 * _reg_inc_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _t_pdf(t: float, df: float) -> float:
    ln = (
        math.lgamma((df + 1.0) / 2.0)
        - math.lgamma(df / 2.0)
        - 0.5 * math.log(df * math.pi)
        - (df + 1.0) / 2.0 * math.log1p(t * t / df)
    )
    return math.exp(ln)


def _initial(p: float, df: float) -> float:
    """A starting point for Newton: exact for 1 and 2 df, Cornish-Fisher's expansion beyond."""
    if df == 1.0:
        return math.tan(math.pi * (p - 0.5))
    if df == 2.0:
        return (2 * p - 1) * math.sqrt(2.0 / (4 * p * (1 - p)))
    z = NormalDist().inv_cdf(p)
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@lru_cache(maxsize=65536)
def _t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (p > 0.5): Newton's method from `_initial`, kept inside a
    bracket that bisection falls back on when a step would leave it."""
    if df > 1e7:
        return NormalDist().inv_cdf(p)
    t = _initial(p, df)
    if not math.isfinite(t) or t <= 0:
        t = 1.0
    lo, hi = 0.0, math.inf
    for _ in range(200):
        err = t_cdf(t, df) - p
        if err < 0:
            lo = t
        else:
            hi = t
        if abs(err) < 1e-14:
            return t
        nxt = t - err / max(_t_pdf(t, df), _TINY)
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * t
        if abs(nxt - t) <= 1e-12 * max(1.0, abs(t)):
            return nxt
        t = nxt
    return t


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided quantile: the t with P(|T| <= t) = confidence (12.706 for 0.95 and df 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} is not in (0, 1)")
    if not df > 0:
        raise ValueError(f"degrees of freedom {df} must be positive")
    # Rounding the key keeps the cache small for Welch's fractional df without visible error.
    return _t_quantile(round(0.5 + confidence / 2.0, 12), round(float(df), 4))
