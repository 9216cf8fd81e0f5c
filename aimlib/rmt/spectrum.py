r"""Spectrum of the prior ``S`` and of the observation ``Y = S + sqrt(Delta) Z``.

Book, chapter "Random matrices".  ``S = W W^T / sqrt(r d)`` (``s = sqrt(rho)``
times a Marchenko-Pastur law of ratio ``1/rho``), ``Z`` a GOE matrix (semicircle on
``[-2, 2]``), ``R_Y(w) = s / (1 - w/s) + Delta w``.  The Stieltjes transform
``g(z) = int mu_Delta(x) / (z - x) dx`` solves the cubic of
:func:`cubic_coefficients`; on the real line ``g(x + i0) = h(x) - i pi mu_Delta(x)``.

Scalar functions work on the host with NumPy (CuPy array arguments are copied
to the host); the samplers draw NumPy arrays from a seed.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import to_device, to_host
from ._arcs import edges_full, quadrature
from ._checks import check_delta, real_points


# --------------------------------------------------------------------------- the prior S
def atom_S(rho) -> float:
    """Mass ``max(0, 1 - rho)`` of the atom at 0 in the spectrum of ``S``."""
    rho = v.rho(rho)
    return max(0.0, 1.0 - rho)


def support_S(rho):
    r"""Edges ``[(s - 1)^2 / s, (s + 1)^2 / s]`` of the continuous part of the spectrum of ``S``.

    ``S = s M`` with ``M = W W^T / r`` Marchenko-Pastur of ratio ``c = 1/rho``,
    whose continuous part lives on ``[(1 - sqrt c)^2, (1 + sqrt c)^2]``; with
    ``sqrt c = 1/s`` this gives ``s (1 -+ 1/s)^2 = (s -+ 1)^2 / s``.
    """
    rho = v.rho(rho)
    s = math.sqrt(rho)
    return ((s - 1.0) ** 2 / s, (s + 1.0) ** 2 / s)


def density_S(x, rho):
    r"""Density of the continuous part of the spectrum of ``S = W W^T / sqrt(r d)``.

    .. math::

        \mu_S(x) = \frac{\sqrt{(x_+ - x)(x - x_-)}}{2\pi x},\qquad
        x_\pm = \frac{(\sqrt\rho \pm 1)^2}{\sqrt\rho},

    which is ``p_c(x/s)/s`` with the Marchenko-Pastur density
    ``p_c(l) = sqrt((l_+ - l)(l - l_-)) / (2 pi c l)`` of ratio ``c = 1/rho``.
    Its mass is ``min(1, rho)``; for ``rho < 1`` the rest, ``1 - rho``, is an atom
    at 0 (see :func:`atom_S`).

    Parameters
    ----------
    x : float or array_like
        Points (real).
    rho : float
        Width ratio ``r/d`` in ``[1e-4, 1e4]``.
    """
    rho = v.rho(rho)
    x = real_points("x", x)
    lo, hi = support_S(rho)
    inside = (x > lo) & (x < hi)
    xs = np.where(inside, x, 0.5 * (lo + hi))
    out = math.sqrt(rho) * np.sqrt(np.maximum((hi - xs) * (xs - lo), 0.0)) / (2 * np.pi * xs)
    return np.where(inside, out, 0.0)


# --------------------------------------------------------------------------- algebra of Y
def cubic_coefficients(z, delta, rho):
    r"""Coefficients ``(A, B, C, D)`` of ``A g^3 + B g^2 + C g + D = 0`` solved by ``g(z)``.

    From ``z = 1/g + s/(1 - g/s) + Delta g`` (``s = sqrt(rho)``), multiplied by
    ``g (s - g) / s``:

    .. math::

        \frac{\Delta}{s} g^3 - \Big(\frac{z}{s} + \Delta\Big) g^2
        + \Big(z + \frac1s - s\Big) g - 1 = 0 .

    ``A`` is a float, ``B`` and ``C`` have the shape of ``z``, ``D = -1``.
    """
    s = math.sqrt(rho)
    z = np.asarray(z)
    return delta / s, -(z / s + delta), z + (1.0 / s - s), -1.0


def discriminant_quartic(delta, rho):
    r"""Coefficients (highest degree first) of the cubic's discriminant as a polynomial in ``z``.

    ``disc = 18 ABCD - 4 B^3 D + B^2 C^2 - 4 A C^3 - 27 A^2 D^2`` with ``B, C``
    affine in ``z``: a quartic with leading coefficient ``1/rho``.  Its real
    roots are the edges of the support of ``mu_Delta`` (where two roots of the
    cubic merge); the support is where ``disc < 0`` (a complex pair of roots).
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    s = math.sqrt(rho)
    A, D = delta / s, -1.0
    B = np.array([-1.0 / s, -delta])          # B(z) = -z/s - Delta
    C = np.array([1.0, 1.0 / s - s])          # C(z) = z + 1/s - s
    pm, pa = np.polymul, np.polyadd
    terms = [
        18 * A * D * pm(B, C),
        -4 * D * pm(pm(B, B), B),
        pm(pm(B, B), pm(C, C)),
        -4 * A * pm(pm(C, C), C),
        np.array([-27 * A * A * D * D]),
    ]
    out = np.zeros(5)
    for t in terms:
        out = pa(out, t)
    return out


def support(delta, rho):
    r"""Support of ``mu_Delta``: a list of one or two intervals ``[(a1, b1), ...]``.

    The edges are the real roots of the discriminant quartic
    (:func:`discriminant_quartic`), computed as ``z(g*)`` at the real critical
    points ``g*`` of the inverse ``z(g) = 1/g + R_Y(g)``.
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    e = edges_full(delta, rho)[0]
    return [(float(e[2 * k]), float(e[2 * k + 1])) for k in range(len(e) // 2)]


# --------------------------------------------------------------------------- roots of the cubic
def _newton(r, A, B, C, D, steps):
    """``steps`` Newton steps on ``A r^3 + B r^2 + C r + D = 0``, each skipped where it is not small."""
    for _ in range(steps):
        P = ((A * r + B) * r + C) * r + D
        dP = (3 * A * r + 2 * B) * r + C
        with np.errstate(all="ignore"):
            st = P / dP
        r = r - np.where(np.isfinite(st) & (np.abs(st) < 0.1 * np.abs(r)), st, 0.0)
    return r


def _roots_complex(z, delta, rho):
    """All three roots of the cubic at the points ``z`` (shape ``(n, 3)``).

    Eigenvalues of the (balanced) companion matrices, then three Newton steps on
    the cubic itself, which restore full relative accuracy when the roots
    differ by many orders of magnitude (small or large ``Delta``).
    """
    z = np.asarray(z, complex).ravel()
    A, B, C, D = cubic_coefficients(z, delta, rho)
    M = np.zeros((z.size, 3, 3), complex)
    M[:, 0, 0] = -B / A
    M[:, 0, 1] = -C / A
    M[:, 0, 2] = -D / A
    M[:, 1, 0] = 1.0
    M[:, 2, 1] = 1.0
    return _newton(np.linalg.eigvals(M), A, B[:, None], C[:, None], D, steps=3)


def _boundary_values(x, delta, rho):
    r"""``g(x + i0) = h(x) - i pi mu(x)`` at real points ``x`` (NumPy, vectorised).

    Inside the support the physical root is the member of the complex pair
    with negative imaginary part.  Outside, all roots may be real and the
    physical one is the real root on the monotone branch of ``z(g)`` that
    contains ``g = 0`` (``x`` beyond the outer edges) or that joins the critical
    points ``g*`` of the two edges of the gap containing ``x``.
    """
    x = np.asarray(x, float)
    edges, gcrit = edges_full(delta, rho)[:2]
    r = _roots_complex(x, delta, rho)
    inside = np.zeros(x.shape, bool)
    for k in range(len(edges) // 2):
        inside |= (x > edges[2 * k]) & (x < edges[2 * k + 1])
    g = np.empty(x.shape, complex)
    if np.any(inside):
        ri = r[inside]
        j = np.argmax(np.abs(ri.imag), axis=1)
        gi = ri[np.arange(len(ri)), j]
        g[inside] = gi.real - 1j * np.abs(gi.imag)
    out = ~inside
    if np.any(out):
        xr = x[out]
        ro = r[out]
        lo = np.full(xr.shape, -np.inf)
        hi = np.full(xr.shape, np.inf)
        right = xr >= edges[-1]
        left = xr <= edges[0]
        lo[right], hi[right] = 0.0, gcrit[-1]
        lo[left], hi[left] = gcrit[0], 0.0
        mid = ~(right | left)
        if np.any(mid):
            j = np.clip(np.searchsorted(edges, xr[mid]), 1, len(edges) - 1)
            ga, gb = gcrit[j - 1], gcrit[j]
            lo[mid], hi[mid] = np.minimum(ga, gb), np.maximum(ga, gb)
        re = ro.real
        dist = (np.maximum(lo[:, None] - re, 0.0) + np.maximum(re - hi[:, None], 0.0)
                + np.abs(ro.imag))
        pick = re[np.arange(len(xr)), np.argmin(dist, axis=1)]
        g[out] = _newton(pick, *cubic_coefficients(xr, delta, rho), steps=2)
    return g


def stieltjes(z, delta, rho):
    r"""Stieltjes transform ``g(z) = int mu_Delta(x) / (z - x) dx`` of ``Y = S + sqrt(Delta) Z``.

    ``g`` is the root of the cubic of :func:`cubic_coefficients` that is the
    analytic continuation of ``1/z`` from infinity: for ``Im z != 0`` the root with
    ``Im g Im z < 0`` and ``|g| <= 1/|Im z|`` (Herglotz property; closest to the
    real-axis value of ``Re z`` if several qualify), and for real ``z = x`` the
    boundary value ``g(x + i0) = h(x) - i pi mu(x)``.

    Parameters
    ----------
    z : complex or array_like
        Points.  Real input gives the boundary value from the upper half plane.
    delta : float
        Noise variance ``Delta > 0``.
    rho : float
        Width ratio ``r / d``.

    Returns
    -------
    complex ndarray of the shape of ``z``.
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    z = to_host(z)
    if z.dtype == object or not np.issubdtype(z.dtype, np.number):
        raise TypeError(f"z must be numeric, got dtype {z.dtype}")
    if not np.all(np.isfinite(z)):
        raise ValueError("z must contain only finite values (found NaN or inf)")
    zc = z.astype(complex)
    out = np.empty(zc.shape, complex)
    real = zc.imag == 0
    if np.any(real):
        out[real] = _boundary_values(zc.real[real], delta, rho)
    if np.any(~real):
        zz = zc[~real]
        r = _roots_complex(zz, delta, rho)
        y = zz.imag[:, None]
        ok = (r.imag * np.sign(y) < 0) & (np.abs(r) <= (1 + 1e-9) / np.abs(y))
        ref = _boundary_values(zz.real, delta, rho)[:, None]
        ref = np.where(np.sign(y) > 0, ref, np.conj(ref))
        score = np.where(ok, np.abs(r - ref), np.inf)
        # fall back to the sign rule alone if nothing passed both tests
        none = ~np.isfinite(score).any(axis=1)
        score[none] = np.where(r[none].imag * np.sign(y[none]) < 0, np.abs(r[none] - ref[none]), np.inf)
        out[~real] = r[np.arange(len(zz)), np.argmin(score, axis=1)]
    return out


def hilbert(x, delta, rho):
    r"""``h(x) = Re g(x) = p.v. int mu_Delta(y) / (x - y) dy`` on the real line.

    This is ``pi`` times the Hilbert transform ``H[mu](x) = (1/pi) p.v. int mu(y)/(x-y) dy``;
    outside the support it is the ordinary (real) Stieltjes transform.
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    x = real_points("x", x)
    return _boundary_values(x.ravel(), delta, rho).real.reshape(x.shape)


def density(x, delta, rho):
    r"""Spectral density ``mu_Delta(x) = -Im g(x + i0) / pi`` of ``Y = S + sqrt(Delta) Z``."""
    delta = check_delta(delta)
    rho = v.rho(rho)
    x = real_points("x", x)
    return np.maximum(-_boundary_values(x.ravel(), delta, rho).imag / np.pi, 0.0).reshape(x.shape)


def moments(delta, rho):
    r"""``(mass, mean, second moment)`` of ``mu_Delta`` by quadrature.

    Exact values: ``1``, ``sqrt(rho)`` and ``1 + rho + Delta`` (free cumulants add).
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    x, w, g = quadrature(delta, rho)
    mu = -g.imag / np.pi
    return float(w @ mu), float(w @ (mu * x)), float(w @ (mu * x * x))


def cdf(x, delta, rho, *, n=2000):
    r"""Cumulative distribution ``F(x) = int_{-inf}^x mu_Delta`` (for Kolmogorov-type comparisons).

    Tabulated on ``n`` points per support interval, ``x = a + (b - a) sin^2(theta/2)``
    (where ``mu dx`` is smooth in ``theta``), integrated with the cumulative
    trapezoid rule in ``theta`` and interpolated linearly: accuracy about
    ``1e-6`` for the default ``n``.
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    n = v.integer("n", n, minimum=10)
    x = real_points("x", x)
    xs, Fs = [], []
    total = 0.0
    for a, b in support(delta, rho):
        th = np.linspace(0.0, np.pi, n)
        xx = a + (b - a) * np.sin(th / 2) ** 2
        f = density(xx, delta, rho) * 0.5 * (b - a) * np.sin(th)
        F = total + np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(th))])
        total = F[-1]
        xs.append(xx)
        Fs.append(F)
    xs = np.concatenate(xs)
    Fs = np.concatenate(Fs) / total
    return np.interp(x, xs, Fs, left=0.0, right=1.0)


def integral_density_cubed(delta, rho):
    r"""``int mu_Delta(x)^3 dx`` by edge-adapted quadrature.

    ``(4 pi^2 / 3) int mu^3 = Phi(mu)`` is Voiculescu's free Fisher information.
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    x, w, g = quadrature(delta, rho)
    mu = -g.imag / np.pi
    return float(w @ mu**3)

# --------------------------------------------------------------------------- sampling
def sample_goe(d, seed=None, *, dtype=np.float64):
    r"""GOE matrix ``Z = (G + G^T)/sqrt(2d)``: off-diagonal variance ``1/d``, diagonal ``2/d``.

    Its spectrum tends to the semicircle on ``[-2, 2]``.  Drawn on the host
    (NumPy) from ``seed``.
    """
    d = v.integer("d", d, minimum=1)
    G = v.generator(seed).standard_normal((d, d))
    return ((G + G.T) / np.sqrt(2.0 * d)).astype(dtype)


def teacher_width(d: int, rho: float) -> int:
    """The integer width ``r = round(rho d)`` (at least 1) of a matrix ``W W^T/sqrt(r d)`` of ratio ``rho``."""
    d = v.integer("d", d, minimum=1)
    rho = v.rho(rho)
    return max(1, int(round(rho * d)))


def sample_wishart(d, rho, seed=None, *, xp=None, dtype=np.float64):
    r"""The prior's matrix ``S = W W^T/sqrt(r d)``, ``W`` of shape ``(d, r)`` i.i.d. ``N(0, 1)``, ``r = round(rho d)``.

    ``W`` is drawn on the host from ``seed`` (the same draw on every backend), cast to
    ``dtype`` and moved to the array module ``xp`` (default: numpy), where the product is formed;
    symmetrised so that ``S = S^T`` exactly.  :class:`aimlib.priors.Wishart` samples with it.
    """
    xp = np if xp is None else xp
    r = teacher_width(d, rho)
    W = to_device(v.generator(seed).standard_normal((d, r)).astype(dtype), xp)
    S = W @ W.T / np.sqrt(r * d)
    return (S + S.T) / 2


def sample_denoising(d, delta, rho, seed=None):
    r"""Draw ``(S, Y)`` with ``S = W W^T/sqrt(r d)`` (:func:`sample_wishart`) and ``Y = S + sqrt(Delta) Z``.

    NumPy arrays; one generator feeds both draws.
    """
    d = v.integer("d", d, minimum=2)
    delta = v.positive("delta", delta)
    rng = v.generator(seed)
    S = sample_wishart(d, rho, rng)
    Y = S + math.sqrt(delta) * sample_goe(d, rng)
    return S, Y
