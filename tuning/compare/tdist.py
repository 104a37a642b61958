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


@lru_cache(maxsize=65536)
def _t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (p > 0.5): Newton's method from the normal quantile, with a
    bracket that bisection falls back on when a Newton step leaves it."""
    if df > 1e7:
        return NormalDist().inv_cdf(p)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    t = min(max(NormalDist().inv_cdf(p), lo), hi)
    for _ in range(100):
        err = t_cdf(t, df) - p
        if err < 0:
            lo = t
        else:
            hi = t
        step = err / max(_t_pdf(t, df), _TINY)
        nxt = t - step
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
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
