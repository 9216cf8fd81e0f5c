r"""The inverse ``z(g) = 1/g + s^2/(s - g) + Delta g`` in the ``g`` plane: edges and the support's quadrature.

Book, chapter "Random matrices", sections "Density, edges and the
discriminant" (the critical points of ``z(g)``) and "An explicit
parametrisation of the support" (the arcs ``Im z(g) = 0``).  Here
``s = sqrt(rho)``; inputs are already validated.
"""
from __future__ import annotations

import functools
import math

import numpy as np

_GL_T, _GL_W = np.polynomial.legendre.leggauss(16)


def z_of_g(g, delta, s):
    """The inverse ``z(g) = 1/g + s^2/(s - g) + Delta g`` (elementwise)."""
    return 1.0 / g + s * s / (s - g) + delta * g


@functools.lru_cache(maxsize=512)
def edges_full(delta: float, rho: float):
    r"""Critical points of ``z(g)`` and the support edges.

    The critical points are the zeros of ``z'(g) = -1/g^2 + s^2/(s - g)^2 + Delta``,
    i.e. of the quartic ``Delta g^4 - 2 s Delta g^3 + (Delta s^2 + s^2 - 1) g^2
    + 2 s g - s^2`` (polished by Newton steps on ``z'``); the edges are ``z(g*)``
    at the real ones.

    Returns
    -------
    edges, gcrit, branch, crit
        Sorted real edges (2 or 4), the matching real ``g*``, all four branch
        points ``z(g*)`` (complex) of ``g(z)`` and all four critical points ``g*``.
    """
    s = math.sqrt(rho)
    companion = np.diag(np.ones(3), -1)      # of the monic quartic: its eigenvalues are the roots
    companion[0] = -np.array([-2 * s * delta, delta * s * s + s * s - 1.0, 2 * s, -s * s]) / delta
    roots = np.linalg.eigvals(companion).astype(complex)
    with np.errstate(all="ignore"):
        for _ in range(4):  # Newton polish on z'(g) = 0 (relative accuracy near both poles)
            zp = -1.0 / roots**2 + s * s / (s - roots) ** 2 + delta
            zpp = 2.0 / roots**3 + 2 * s * s / (s - roots) ** 3
            step = zp / zpp
            roots = roots - np.where(np.isfinite(step), step, 0.0)
    is_real = np.abs(roots.imag) <= 1e-7 * np.abs(roots)
    greal = np.sort(roots[is_real].real)
    branch = z_of_g(roots, delta, s)
    zr = z_of_g(greal, delta, s)
    order = np.argsort(zr)
    edges, gcrit = zr[order], greal[order]
    if len(edges) not in (2, 4):  # numerically ambiguous pair: keep the outermost two
        edges, gcrit = edges[[0, -1]], gcrit[[0, -1]]
    return edges, gcrit, branch, roots


# --------------------------------------------------------------------------- the arcs Im z(g) = 0
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


def _root_pair(K, c0, sq, delta):
    """Both roots ``P_small <= P_large`` of ``Delta P^2 + K P + c0 = 0``.

    With ``sq = sqrt(K^2 - 4 Delta c0)`` and ``q = -(K + sign(K) sq)/2``, the
    roots are ``q / Delta`` and ``c0 / q`` (no cancellation).
    """
    q = -0.5 * (K + np.copysign(sq, K))
    with np.errstate(all="ignore"):
        p1 = q / delta
        p2 = np.where(q != 0, c0 / np.where(q != 0, q, 1.0), -K / delta)
    return np.minimum(p1, p2), np.maximum(p1, p2)


def _curve_P(xi, delta, s):
    r"""``(P_small, P_large, sq)`` on the arc: the roots of ``Delta P^2 + K P + c0 = 0``.

    ``K = s^2 - 1 + Delta s^2 - 2 Delta s xi``, ``c0 = 2 s xi - s^2`` and
    ``sq = sqrt(K^2 - 4 Delta c0)`` (so that ``2 Delta P + K = -+ sq``).
    """
    K = s * s - 1.0 + delta * s * s - 2.0 * delta * s * xi
    c0 = 2.0 * s * xi - s * s
    sq = np.sqrt(np.maximum(K * K - 4.0 * delta * c0, 0.0))
    return (*_root_pair(K, c0, sq, delta), sq)


def _curve_point_both(t, delta, s, fold):
    """``(xi, P_small, P_large, sq)`` on the arc at ``xi = t`` (``fold`` None) or ``xi = fold - t``.

    With ``u = xi_f - xi`` measured from the lower fold
    ``xi_f = ((s - 1)^2 + Delta s^2)/(2 Delta s)``: ``K = 2(s - 1) + 2 Delta s u``,
    ``c0 = (s - 1)^2/Delta - 2 s u`` and ``K^2 - 4 Delta c0 = 4 Delta s^2 u (2 + Delta u)``,
    free of cancellation near the fold.
    """
    if fold is None:
        Ps, Pl, sq = _curve_P(t, delta, s)
        return t, Ps, Pl, sq
    u = t
    K = 2.0 * (s - 1.0) + 2.0 * delta * s * u
    c0 = (s - 1.0) ** 2 / delta - 2.0 * s * u
    sq = 2.0 * s * np.sqrt(np.maximum(delta * u * (2.0 + delta * u), 0.0))
    return (fold - u, *_root_pair(K, c0, sq, delta), sq)


# --------------------------------------------------------------------------- quadrature
def _pieces(crit, folds, delta, s):
    """Pieces ``(l, r, large)`` of the arcs in ``xi``, and the singular points of the integrand.

    A piece lies between consecutive special points (real critical points, folds)
    on the root ``P`` (``large`` or small) with ``y^2 = P - xi^2 > 0``.  The
    singular points are the critical points, the folds (two roots ``P`` meet) and
    ``xi = s/2`` (a root ``P`` vanishes: ``g = 0`` or ``|s - g| = 0``).
    """
    isreal = np.abs(crit.imag) <= 1e-7 * np.abs(crit)
    creal = np.sort(crit[isreal].real)
    special = np.sort(np.concatenate([creal, folds]))
    sing = np.concatenate([creal, crit[~isreal], folds, [0.5 * s]]).astype(complex)
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
    return pieces, sing


def _fold_end(u, delta, s, fold, large):
    """One end ``u`` of a piece near the fold, refined by Newton on ``y^2(u) = 0`` where it is an edge.

    Scalar arithmetic (two numbers per piece); a step that is not finite or not below
    ``|u|/2`` ends the refinement.
    """
    K0, c00 = 2.0 * (s - 1.0), (s - 1.0) ** 2 / delta
    for _ in range(6):
        if u == 0:
            break
        K, c0 = K0 + 2.0 * delta * s * u, c00 - 2.0 * s * u
        sq = 2.0 * s * math.sqrt(max(delta * u * (2.0 + delta * u), 0.0))
        q = -0.5 * (K + math.copysign(sq, K))
        p1, p2 = q / delta, (c0 / q if q != 0 else -K / delta)
        xi, P = fold - u, (max(p1, p2) if large else min(p1, p2))
        Q = (xi - s) * (xi - s) + max(P - xi * xi, 0.0)
        if Q == 0 or sq == 0:   # dP infinite or undefined: the step is 0 or not a number
            break
        den = 2.0 * s * (s * s * P / Q) / (sq if large else -sq) + 2.0 * xi
        step = (P - xi * xi) / den if den != 0 else math.nan
        if not (math.isfinite(step) and abs(step) < 0.5 * abs(u)):
            break
        u -= step
    return u


def _piece_rule(l, r, large, delta, s, fold, sing):
    """Nodes ``t``, weights (for ``dt``), ``large`` and ``use_u`` flags on the piece ``[l, r]``.

    The coordinate ``t`` is ``xi``, or ``u = xi_f - xi`` when the piece reaches
    towards the lower fold (near ``rho = 1`` and small ``Delta`` it ends within
    ``O(Delta)`` of the fold, below the resolution of ``xi``);
    ``t = t_l + (t_r - t_l) sin^2(theta/2)``, Gauss-Legendre panels in ``theta``.
    """
    use_u = r <= fold and abs(fold) <= 4.0 * max(abs(l), abs(r))
    if use_u:
        tl, tr = (_fold_end(fold - e, delta, s, fold, large) for e in (r, l))
        sing_loc = fold - sing
    else:
        tl, tr = l, r
        sing_loc = sing
    # real singular points inside the piece are not singular on it (y > 0
    # there); the two ends (possibly refined above) are handled by the substitution
    pr = sing_loc.real
    at_end = (np.abs(pr - tl) <= 1e-6 * abs(tl)) | (np.abs(pr - tr) <= 1e-6 * abs(tr))
    keep = ~((sing.imag == 0) & (((pr >= tl) & (pr <= tr)) | at_end))
    c, hw = 0.5 * (tl + tr), 0.5 * (tr - tl)
    th = np.arccos(((c - sing_loc[keep]) / hw).astype(complex))  # t = c - hw cos(theta)
    pan = np.array(_panels(th))
    lo, hi = pan[:, 0:1], pan[:, 1:2]
    theta = (0.5 * (hi + lo) + 0.5 * (hi - lo) * _GL_T).ravel()
    t = tl + (tr - tl) * np.sin(theta / 2) ** 2
    w = (0.5 * (hi - lo) * _GL_W).ravel() * hw * np.sin(theta)
    return t, w, np.full(theta.shape, large), np.full(theta.shape, use_u)


@functools.lru_cache(maxsize=512)
def quadrature(delta: float, rho: float):
    r"""Nodes ``x``, weights ``w`` (for ``dx``) and exact boundary values ``g(x + i0)`` on the support.

    On the arcs ``g = xi - i y`` with ``P = |g|^2`` a root of

    .. math:: \Delta P^2 + (s^2 - 1 + \Delta s^2 - 2\Delta s\,\xi) P + 2 s \xi - s^2 = 0 ,

    and ``x = s^3/|s - g|^2 + 2 Delta xi``, ``mu(x) = y/pi``, ``h(x) = xi``.
    Each piece of arc is mapped by a ``sin^2`` substitution that smooths its
    square-root ends, with a composite 16-point Gauss-Legendre rule refined
    near the other singular points; no polynomial is solved at the nodes.
    The returned arrays are read-only.
    """
    s = math.sqrt(rho)
    crit = edges_full(delta, rho)[3]
    folds = np.array([((s - 1.0) ** 2 + delta * s * s) / (2 * delta * s),
                      ((s + 1.0) ** 2 + delta * s * s) / (2 * delta * s)])
    pieces, sing = _pieces(crit, folds, delta, s)
    fold = float(folds[0])
    rules = [_piece_rule(l, r, large, delta, s, fold, sing) for l, r, large in pieces]
    tt, wt, large, use_u = (np.concatenate(parts) for parts in zip(*rules))
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


def clear_caches() -> None:
    """Empty the caches of ``edges_full`` and :func:`quadrature` (for timings from a cold start)."""
    quadrature.cache_clear()
    edges_full.cache_clear()
