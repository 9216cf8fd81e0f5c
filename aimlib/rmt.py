r"""Random-matrix toolkit for the prior side: spectra, Stieltjes transforms, the RIE.

Model (book, chapters "Random matrices" and "Matrix denoising")
---------------------------------------------------------------
* Target: ``S = W W^T / sqrt(r d)`` with ``W`` of shape ``(d, r)`` i.i.d. ``N(0, 1)``,
  ``rho = r / d`` and ``s = sqrt(rho)``.  Its spectrum is ``s`` times a
  Marchenko-Pastur law of ratio ``1/rho`` (plus an atom of mass ``1 - rho`` at 0
  when ``rho < 1``); its R-transform is ``R_S(w) = s / (1 - w / s)``, i.e. the
  free cumulants are ``kappa_k = s^(2 - k)``: mean ``s``, variance ``1``.
* Observation: ``Y = S + sqrt(Delta) Z`` with ``Z`` a GOE matrix whose spectrum
  is the semicircle on ``[-2, 2]`` (off-diagonal variance ``1/d``, diagonal
  ``2/d``); ``R_Y(w) = R_S(w) + Delta w``.

Conventions
-----------
* Stieltjes transform: ``g(z) = int mu(x) / (z - x) dx``, so ``g(z) ~ 1/z`` at
  infinity and ``Im g(z) < 0`` for ``Im z > 0``.  On the real line the boundary
  value is ``g(x + i0) = h(x) - i pi mu(x)`` with ``h(x) = p.v. int mu(y)/(x - y) dy``
  (``pi`` times the Hilbert transform of ``mu``).
* With this sign the inverse of ``g`` is ``z(g) = 1/g + R_Y(g)``, and clearing the
  denominators ``g (s - g)`` gives the cubic of the book
  ``(Delta/s) g^3 - (z/s + Delta) g^2 + (z + 1/s - s) g - 1 = 0``.
* RIE (Bayes-optimal denoiser of ``Y``): same eigenvectors as ``Y``, eigenvalue
  map ``lambda -> lambda - 2 Delta h(lambda)``.
* MMSE: ``mmse(Delta) = Delta - (4 pi^2 / 3) Delta^2 int mu_Delta^3``, computed in
  the equivalent, cancellation-free form
  ``Delta/(1+Delta) - Delta^2 int mu (2 h(x) - (x - s)/(1+Delta))^2 dx``.

The scalar functions work on the host with NumPy (array arguments may be CuPy
arrays: they are copied to the host); :func:`rie` and :func:`linear_shrinkage`
follow the array module of their input (NumPy or CuPy).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import _validate as v
from .backend import get_array_module, to_common, to_device, to_host

__all__ = [
    "atom_S",
    "density_S",
    "support_S",
    "cubic_coefficients",
    "discriminant_quartic",
    "stieltjes",
    "hilbert",
    "density",
    "support",
    "moments",
    "cdf",
    "integral_density_cubed",
    "mmse",
    "mmse_gaussian",
    "rie_eigenvalues",
    "rie",
    "linear_shrinkage",
    "sample_goe",
    "sample_denoising",
]

# Range in which the scalar routines are tested to full accuracy (wider values
# are accepted and computed with the same formulas, outside the tested range).
RHO_RANGE = v.RHO_RANGE
DELTA_RANGE = (1e-12, 1e12)

_GL_N = 16
_GL_T, _GL_W = np.polynomial.legendre.leggauss(_GL_N)


# --------------------------------------------------------------------------- inputs
def _check_delta(delta) -> float:
    return v.in_range("delta", v.positive("delta", delta), *DELTA_RANGE)


def _real_points(name, x):
    x = to_host(x)
    if x.dtype == object or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise TypeError(f"{name} must be real (numbers or an array of real numbers), got dtype {x.dtype}")
    x = x.astype(float)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must contain only finite values (found NaN or inf)")
    return x


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
    x = _real_points("x", x)
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
    delta = _check_delta(delta)
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


def _z_of_g(g, delta, s):
    """The inverse ``z(g) = 1/g + s^2/(s - g) + Delta g`` (elementwise)."""
    return 1.0 / g + s * s / (s - g) + delta * g


def _edges(delta: float, rho: float):
    """``(edges, gcrit, branch)`` from :func:`_edges_full`."""
    return _edges_full(delta, rho)[:3]


@functools.lru_cache(maxsize=512)
def _edges_full(delta: float, rho: float):
    r"""Critical points of ``z(g)`` and the support edges.

    The edges are ``z(g*)`` at the real zeros of
    ``z'(g) = -1/g^2 + s^2/(s - g)^2 + Delta``, i.e. of the quartic
    ``Delta g^4 - 2 s Delta g^3 + (Delta s^2 + s^2 - 1) g^2 + 2 s g - s^2``.
    Since ``z'(g*) = 0``, an error ``e`` in ``g*`` moves the edge by ``O(e^2)``:
    the edges are well conditioned.

    Returns ``(edges, gcrit, branch, crit)``: sorted real edges (2 or 4), the
    matching critical ``g*``, all four branch points ``z(g*)`` (complex) of the
    algebraic function ``g(z)`` and all four critical points ``g*``.
    """
    s = math.sqrt(rho)
    coef = [delta, -2 * s * delta, delta * s * s + s * s - 1.0, 2 * s, -s * s]
    roots = np.roots(coef).astype(complex)

    def zp(g):
        return -1.0 / g**2 + s * s / (s - g) ** 2 + delta

    def zpp(g):
        return 2.0 / g**3 + 2 * s * s / (s - g) ** 3

    for _ in range(4):  # Newton polish on z'(g) = 0 (relative accuracy near both poles)
        with np.errstate(all="ignore"):
            step = zp(roots) / zpp(roots)
        step = np.where(np.isfinite(step), step, 0.0)
        roots = roots - step
    is_real = np.abs(roots.imag) <= 1e-7 * np.abs(roots)
    greal = np.sort(roots[is_real].real)
    branch = _z_of_g(roots, delta, s)
    zr = _z_of_g(greal, delta, s)
    order = np.argsort(zr)
    edges, gcrit = zr[order], greal[order]
    if len(edges) not in (2, 4):  # numerically ambiguous pair: keep the outermost two
        edges, gcrit = edges[[0, -1]], gcrit[[0, -1]]
    return edges, gcrit, branch, roots


def support(delta, rho):
    r"""Support of ``mu_Delta``: a list of one or two intervals ``[(a1, b1), ...]``.

    The edges are the real roots of the discriminant quartic
    (:func:`discriminant_quartic`), computed as ``z(g*)`` at the real critical
    points ``g*`` of the inverse ``z(g) = 1/g + R_Y(g)``.
    """
    delta = _check_delta(delta)
    rho = v.rho(rho)
    e = _edges(delta, rho)[0]
    return [(float(e[2 * k]), float(e[2 * k + 1])) for k in range(len(e) // 2)]


# --------------------------------------------------------------------------- roots on the real line
def _roots_complex(z, delta, rho):
    """All three roots of the cubic at the points ``z`` (shape ``(n, 3)``).

    Eigenvalues of the (balanced) companion matrices, then two Newton steps on
    the cubic itself, which restores full relative accuracy when the roots
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
    r = np.linalg.eigvals(M)
    Bf, Cf = B[:, None], C[:, None]
    for _ in range(3):
        P = ((A * r + Bf) * r + Cf) * r + D
        dP = (3 * A * r + 2 * Bf) * r + Cf
        with np.errstate(all="ignore"):
            st = P / dP
        r = r - np.where(np.isfinite(st) & (np.abs(st) < 0.1 * np.abs(r)), st, 0.0)
    return r


def _boundary_values(x, delta, rho):
    r"""``g(x + i0) = h(x) - i pi mu(x)`` at real points ``x`` (NumPy, vectorised).

    Inside the support the physical root is the member of the complex pair
    with negative imaginary part.  Outside, all roots may be real and the
    physical one is the real root on the monotone branch of ``z(g)`` that
    contains ``g = 0`` (``x`` beyond the outer edges) or that joins the critical
    points ``g*`` of the two edges of the gap containing ``x``.
    """
    x = np.asarray(x, float)
    edges, gcrit, _ = _edges(delta, rho)
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
        A, B, C, D = cubic_coefficients(xr, delta, rho)
        for _ in range(2):  # real Newton polish of the chosen real root
            P = ((A * pick + B) * pick + C) * pick + D
            dP = (3 * A * pick + 2 * B) * pick + C
            with np.errstate(all="ignore"):
                st = P / dP
            pick = pick - np.where(np.isfinite(st) & (np.abs(st) < 0.1 * np.abs(pick)), st, 0.0)
        g[out] = pick
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
    delta = _check_delta(delta)
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
    delta = _check_delta(delta)
    rho = v.rho(rho)
    x = _real_points("x", x)
    return _boundary_values(x.ravel(), delta, rho).real.reshape(x.shape)


def density(x, delta, rho):
    r"""Spectral density ``mu_Delta(x) = -Im g(x + i0) / pi`` of ``Y = S + sqrt(Delta) Z``."""
    delta = _check_delta(delta)
    rho = v.rho(rho)
    x = _real_points("x", x)
    return np.maximum(-_boundary_values(x.ravel(), delta, rho).imag / np.pi, 0.0).reshape(x.shape)


# --------------------------------------------------------------------------- quadrature
def _panels(sing, depth=60):
    """Panels of ``[0, pi]``, each no longer than twice its distance to the points ``sing``.

    ``sing`` is an array of complex singularity locations in the ``theta`` plane.
    """
    pts = [(float(p.real), abs(float(p.imag))) for p in np.ravel(sing)]
    out = []
    stack = [(np.pi / 2, np.pi, 0), (0.0, np.pi / 2, 0)]
    while stack:
        a, b, lev = stack.pop()
        dist = math.inf
        for pr, pi_ in pts:
            dx = a - pr if pr < a else (pr - b if pr > b else 0.0)
            dist = min(dist, math.hypot(dx, pi_))
        if (b - a) > 2.0 * dist and lev < depth:
            m = 0.5 * (a + b)
            stack.append((m, b, lev + 1))
            stack.append((a, m, lev + 1))
        else:
            out.append((a, b))
    return out


def _curve_P(xi, delta, s):
    r"""Both roots ``P_small <= P_large`` of ``Delta P^2 + K P + c0 = 0`` (the arc ``Im z(g) = 0``).

    ``K = s^2 - 1 + Delta s^2 - 2 Delta s xi`` and ``c0 = 2 s xi - s^2``; also
    returns ``sq = sqrt(K^2 - 4 Delta c0)`` (so that ``2 Delta P + K = -+ sq``).
    """
    K = s * s - 1.0 + delta * s * s - 2.0 * delta * s * xi
    c0 = 2.0 * s * xi - s * s
    sq = np.sqrt(np.maximum(K * K - 4.0 * delta * c0, 0.0))
    q = -0.5 * (K + np.copysign(sq, K))
    with np.errstate(all="ignore"):
        p1 = q / delta
        p2 = np.where(q != 0, c0 / np.where(q != 0, q, 1.0), -K / delta)
    return np.minimum(p1, p2), np.maximum(p1, p2), sq


def _curve_point_both(t, delta, s, fold):
    """``(xi, P_small, P_large, sq)`` at ``xi = t`` (``fold`` None) or ``xi = fold - t`` (see :func:`_curve_point`)."""
    if fold is None:
        Ps, Pl, sq = _curve_P(t, delta, s)
        return t, Ps, Pl, sq
    u = t
    K = 2.0 * (s - 1.0) + 2.0 * delta * s * u
    c0 = (s - 1.0) ** 2 / delta - 2.0 * s * u
    sq = 2.0 * s * np.sqrt(np.maximum(delta * u * (2.0 + delta * u), 0.0))
    q = -0.5 * (K + np.copysign(sq, K))
    with np.errstate(all="ignore"):
        p1 = q / delta
        p2 = np.where(q != 0, c0 / np.where(q != 0, q, 1.0), -K / delta)
    return fold - u, np.minimum(p1, p2), np.maximum(p1, p2), sq


def _curve_point(t, delta, s, fold, large):
    """``(xi, P, sq)`` on one branch of the arc, at ``xi = t`` (``fold`` None) or ``xi = fold - t``.

    With ``u = xi_f - xi`` measured from the lower fold
    ``xi_f = ((s - 1)^2 + Delta s^2)/(2 Delta s)`` the coefficients are
    ``K = 2(s - 1) + 2 Delta s u``, ``c0 = (s - 1)^2/Delta - 2 s u`` and the
    discriminant factorises, ``K^2 - 4 Delta c0 = 4 Delta s^2 u (2 + Delta u)``:
    no cancellation near the fold.
    """
    xi, Ps, Pl, sq = _curve_point_both(t, delta, s, fold)
    return xi, (Pl if large else Ps), sq


@functools.lru_cache(maxsize=512)
def _quadrature(delta: float, rho: float):
    r"""Nodes ``x``, weights ``w`` (for ``dx``) and exact boundary values ``g(x + i0)`` on the support.

    Parametrisation by ``xi = Re g`` along the arcs ``Im z(g) = 0`` of the
    ``g`` plane.  Writing ``g = xi - i y`` and ``P = |g|^2``, the condition
    ``-1/P + s^2/|s - g|^2 + Delta = 0`` reads

    .. math:: \Delta P^2 + (s^2 - 1 + \Delta s^2 - 2\Delta s\,\xi) P + 2 s \xi - s^2 = 0 ,

    and on the arc ``x = Re z(g) = s^3/|s - g|^2 + 2 Delta xi``,
    ``mu(x) = y/pi``, ``h(x) = xi``.  The arcs split into pieces that are graphs
    ``P(xi)`` on one root (smaller or larger) of this quadratic; a piece ends
    at a real critical point ``g*`` (a support edge, ``y = 0``) or at a fold
    ``xi_f = ((s -+ 1)^2 + Delta s^2) / (2 Delta s)`` where the two roots meet.
    With ``xi = l + (r - l) sin^2(theta/2)`` both kinds of square-root ends
    become smooth; the other singular points (complex critical points, the
    other folds and ends, the pole ``g = s``) set a composite 16-point
    Gauss-Legendre mesh in ``theta``, bisected until each panel is at most
    twice as long as its distance to them.  No polynomial root is solved at the
    nodes.
    """
    s = math.sqrt(rho)
    _, _, _, crit = _edges_full(delta, rho)
    folds = np.array([((s - 1.0) ** 2 + delta * s * s) / (2 * delta * s),
                      ((s + 1.0) ** 2 + delta * s * s) / (2 * delta * s)])
    isreal = np.abs(crit.imag) <= 1e-7 * np.abs(crit)
    creal = np.sort(crit[isreal].real)
    special = np.sort(np.concatenate([creal, folds]))
    # singular points of the integrand in the xi plane: critical points (y = 0),
    # folds (two roots P meet) and xi = s/2 where one root P vanishes (g = 0 or |s - g| = 0)
    sing_all = np.concatenate([creal, crit[~isreal], folds, [0.5 * s]]).astype(complex)
    fold = folds[0]
    # pieces: intervals between consecutive special points on which a branch has y^2 > 0
    lo_sp, hi_sp = special[:-1], special[1:]
    mids = 0.5 * (lo_sp + hi_sp)
    Ps_m, Pl_m, sq_m = _curve_P(mids, delta, s)
    pieces = []
    for k in range(len(mids)):
        if not (hi_sp[k] > lo_sp[k] and sq_m[k] > 0):
            continue
        for large, Pm in ((False, Ps_m[k]), (True, Pl_m[k])):
            if Pm - mids[k] ** 2 > 0:
                pieces.append((float(lo_sp[k]), float(hi_sp[k]), large))
    # per piece: local coordinate, ends, panels; nodes of all pieces are evaluated together
    T_all, W_all, L_all, U_all = [], [], [], []
    real_pt = sing_all.imag == 0
    for l, r, large in pieces:
        # Local coordinate: xi itself, or u = xi_f - xi measured from the lower fold
        # when the piece reaches towards it (near rho = 1 and small Delta the
        # piece ends within O(Delta) of the fold, below the resolution of xi).
        use_u = r <= fold and abs(fold) <= 4.0 * max(abs(l), abs(r))
        if use_u:
            ends = np.array([fold - r, fold - l])
            for _ in range(6):  # Newton on y^2(u) = 0 at the ends that are edges
                xi_e, P_e, sq_e = _curve_point(ends, delta, s, fold, large)
                Q_e = (xi_e - s) ** 2 + np.maximum(P_e - xi_e**2, 0.0)
                with np.errstate(all="ignore"):
                    dP = 2.0 * s * (s * s * P_e / Q_e) / (sq_e if large else -sq_e)
                    step = (P_e - xi_e**2) / (dP + 2.0 * xi_e)
                ok = np.isfinite(step) & (np.abs(step) < 0.5 * np.abs(ends)) & (ends != 0)
                if not ok.any():
                    break
                ends = ends - np.where(ok, step, 0.0)
            tl, tr = float(ends[0]), float(ends[1])
            sing_loc = fold - sing_all
        else:
            tl, tr = l, r
            sing_loc = sing_all
        # real singular points inside the piece are not singular on it (y > 0
        # there); the two ends (possibly refined above) are handled by the substitution
        pr = sing_loc.real
        at_end = (np.abs(pr - tl) <= 1e-6 * abs(tl)) | (np.abs(pr - tr) <= 1e-6 * abs(tr))
        keep = ~(real_pt & (((pr >= tl) & (pr <= tr)) | at_end))
        c, hw = 0.5 * (tl + tr), 0.5 * (tr - tl)
        # t = c - hw cos(theta)
        th = np.arccos(((c - sing_loc[keep]) / hw).astype(complex))
        pan = np.array(_panels(th))
        lo, hi = pan[:, 0:1], pan[:, 1:2]
        theta = (0.5 * (hi + lo) + 0.5 * (hi - lo) * _GL_T).ravel()
        T_all.append(tl + (tr - tl) * np.sin(theta / 2) ** 2)
        W_all.append((0.5 * (hi - lo) * _GL_W).ravel() * hw * np.sin(theta))
        L_all.append(np.full(theta.shape, large))
        U_all.append(np.full(theta.shape, use_u))
    tt = np.concatenate(T_all)
    wt = np.concatenate(W_all)
    large = np.concatenate(L_all)
    use_u = np.concatenate(U_all)
    xi = np.empty_like(tt)
    P = np.empty_like(tt)
    sq = np.empty_like(tt)
    for mode in (False, True):
        sel = use_u == mode
        if sel.any():
            xi_m, Ps, Pl, sq_m = _curve_point_both(tt[sel], delta, s, fold if mode else None)
            xi[sel], P[sel], sq[sel] = xi_m, np.where(large[sel], Pl, Ps), sq_m
    y2 = np.maximum(P - xi * xi, 0.0)
    Q = (xi - s) ** 2 + y2                       # |s - g|^2
    # dQ/dxi = P' - 2s = -2s (s^2 + Delta Q) / (2 Delta P + K), 2 Delta P + K = +-sq
    dQ = -2.0 * s * (s * s + delta * Q) / np.where(large, sq, -sq)
    dx = -s**3 * dQ / Q**2 + 2.0 * delta
    x = s**3 / Q + 2.0 * delta * xi
    w = wt * np.abs(dx)
    g = xi - 1j * np.sqrt(y2)
    for arr in (x, w, g):
        arr.setflags(write=False)
    return x, w, g


def moments(delta, rho):
    r"""``(mass, mean, second moment)`` of ``mu_Delta`` by quadrature.

    Exact values: ``1``, ``sqrt(rho)`` and ``1 + rho + Delta`` (free cumulants add).
    """
    delta = _check_delta(delta)
    rho = v.rho(rho)
    x, w, g = _quadrature(delta, rho)
    mu = -g.imag / np.pi
    return float(w @ mu), float(w @ (mu * x)), float(w @ (mu * x * x))


def cdf(x, delta, rho, *, n=2000):
    r"""Cumulative distribution ``F(x) = int_{-inf}^x mu_Delta`` (for Kolmogorov-type comparisons).

    Tabulated on ``n`` points per support interval, ``x = a + (b - a) sin^2(theta/2)``
    (where ``mu dx`` is smooth in ``theta``), integrated with the cumulative
    trapezoid rule in ``theta`` and interpolated linearly: accuracy about
    ``1e-6`` for the default ``n``.
    """
    delta = _check_delta(delta)
    rho = v.rho(rho)
    n = v.integer("n", n, minimum=10)
    x = _real_points("x", x)
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
    delta = _check_delta(delta)
    rho = v.rho(rho)
    x, w, g = _quadrature(delta, rho)
    mu = -g.imag / np.pi
    return float(w @ mu**3)


def _mmse_one(delta: float, rho: float) -> float:
    s = math.sqrt(rho)
    x, w, g = _quadrature(delta, rho)
    xi, y = g.real, -g.imag
    P = xi * xi + y * y
    Q = (xi - s) ** 2 + y * y
    # 2 h - (x - s)/(1 + Delta) with x = s^3/Q + 2 Delta xi, without cancellation
    dev = (2.0 * xi * (P - 2.0 * s * xi) + s * P) / (Q * (1.0 + delta))
    return delta / (1.0 + delta) - delta * delta * float(w @ (y / np.pi * dev * dev))


def mmse(delta, rho):
    r"""Minimum mean-square error ``lim (1/d) E ||E[S|Y] - S||_F^2`` of extensive-rank denoising.

    .. math::

        \mathrm{mmse}(\Delta) = \Delta - \frac{4\pi^2}{3}\Delta^2 \int \mu_\Delta^3
        = \frac{\Delta}{1+\Delta} - \Delta^2 \int \mu_\Delta(x)
          \Big(2h(x) - \frac{x - \sqrt\rho}{1+\Delta}\Big)^2 dx ,

    the second form (free Cramer-Rao: ``Phi Var >= 1``) being free of the
    cancellation of the first one at large ``Delta``.  Limits: ``mmse/Delta ->
    2 rho - rho^2`` (``rho < 1``) or ``1`` (``rho >= 1``) as ``Delta -> 0``;
    ``mmse = 1 - 1/Delta + O(Delta^-2)`` as ``Delta -> infinity``;
    ``mmse <= Delta/(1+Delta)`` (the Gaussian-prior value).

    Parameters
    ----------
    delta : float or array_like
        Noise variance(s) ``Delta`` in ``[1e-12, 1e12]``.
    rho : float
        Width ratio in ``[1e-4, 1e4]``.

    Returns
    -------
    float, or ndarray of the shape of ``delta``.
    """
    rho = v.rho(rho)
    if np.ndim(delta) == 0:
        return _mmse_one(_check_delta(delta), rho)
    arr = _real_points("delta", delta)
    out = np.empty(arr.shape)
    for i, dl in np.ndenumerate(arr):
        out[i] = _mmse_one(_check_delta(float(dl)), rho)
    return out


def mmse_gaussian(delta):
    r"""``Delta / (1 + Delta)``: the MMSE for a GOE prior of unit variance (the ``rho -> inf`` limit)."""
    if np.ndim(delta) == 0:
        d = v.positive("delta", delta, allow_inf=False)
        return d / (1.0 + d)
    arr = _real_points("delta", delta)
    if np.any(arr <= 0):
        raise ValueError("delta must be > 0")
    return arr / (1.0 + arr)


# --------------------------------------------------------------------------- estimators
def rie_eigenvalues(lam, delta, rho):
    r"""The RIE eigenvalue map ``xi(lambda) = lambda - 2 Delta h(lambda)`` (NumPy, vectorised)."""
    delta = _check_delta(delta)
    rho = v.rho(rho)
    lam = _real_points("lam", lam)
    return lam - 2.0 * delta * hilbert(lam, delta, rho)


def rie(Y, delta, rho):
    r"""Rotationally invariant estimator of ``S`` from ``Y = S + sqrt(Delta) Z``.

    ``Y = sum_i lambda_i u_i u_i^T``  ->  ``S_hat = sum_i xi(lambda_i) u_i u_i^T`` with
    ``xi(lambda) = lambda - 2 Delta h(lambda)`` and ``h`` the principal-value
    Stieltjes transform of the limiting spectrum of ``Y`` (:func:`hilbert`).  In
    the limit this is the posterior mean ``E[S | Y]`` (Bayes-optimal) and its
    error per dimension is :func:`mmse`.

    Parameters
    ----------
    Y : (d, d) symmetric array (NumPy or CuPy)
    delta, rho : float

    Returns
    -------
    Array of the same module and shape as ``Y``.
    """
    delta = _check_delta(delta)
    rho = v.rho(rho)
    Y = v.symmetric_matrix("Y", Y)
    xp = get_array_module(Y)
    Yf = Y.astype(xp.float64) if Y.dtype != xp.float32 else Y
    lam, U = xp.linalg.eigh((Yf + Yf.T) / 2)
    xi = rie_eigenvalues(to_host(lam), delta, rho)
    xi = to_device(xi.astype(to_host(lam).dtype), xp)
    return (U * xi[None, :]) @ U.T


def linear_shrinkage(Y, delta, rho):
    r"""Best linear (Wiener) estimator ``sqrt(rho) I + (Y - sqrt(rho) I)/(1 + Delta)``.

    Its error per dimension tends to ``Delta/(1 + Delta)`` (:func:`mmse_gaussian`).
    """
    delta = _check_delta(delta)
    rho = v.rho(rho)
    Y = v.symmetric_matrix("Y", Y)
    xp = get_array_module(Y)
    s = math.sqrt(rho)
    eye = xp.eye(Y.shape[0], dtype=Y.dtype)
    return s * eye + (Y - s * eye) / (1.0 + delta)


# --------------------------------------------------------------------------- sampling
def sample_goe(d, seed=None, *, dtype=np.float64):
    r"""GOE matrix ``Z = (G + G^T)/sqrt(2d)``: off-diagonal variance ``1/d``, diagonal ``2/d``.

    Its spectrum tends to the semicircle on ``[-2, 2]``.  Drawn on the host
    (NumPy) from ``seed``.
    """
    d = v.integer("d", d, minimum=1)
    G = v.generator(seed).standard_normal((d, d))
    return ((G + G.T) / np.sqrt(2.0 * d)).astype(dtype)


def sample_denoising(d, delta, rho, seed=None):
    r"""Draw ``(S, Y)`` with ``S = W W^T/sqrt(r d)`` (:func:`aimlib.model.sample_teacher`) and ``Y = S + sqrt(Delta) Z``.

    NumPy arrays; one generator feeds both draws.
    """
    from .model import sample_teacher

    d = v.integer("d", d, minimum=2)
    delta = v.positive("delta", delta)
    rho = v.rho(rho)
    rng = v.generator(seed)
    S = to_host(sample_teacher(d, rho, rng, backend="numpy"))
    Y = S + math.sqrt(delta) * sample_goe(d, rng)
    return S, Y
