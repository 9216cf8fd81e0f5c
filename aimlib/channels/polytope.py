r"""Gaussian probabilities of polyhedral cones and their gradients (the face formula).

A cone is a set of linear inequalities ``u = D h > 0`` on a Gaussian vector
``h ~ N(omega, V diag(s2))``.  In standard units ``u / sqrt(V) ~ N(mu, C)`` with
``mu = D omega / sqrt(V)`` and ``C = D diag(s2) D^T``; ``C`` may be singular (the
constraints of a hardmax output are linearly dependent).

**Probability.**  An incremental Cholesky factor ``C = A A^T`` (``A`` of shape
``m x r``, ``r = rank C``) that skips dependent rows writes ``u = mu + A z`` with
``z ~ N(0, I_r)`` and row ``j`` of ``A`` vanishing beyond a last column ``l(j)``.
Separation of variables (Genz) then integrates ``z_0, ..., z_{r-1}`` in turn:
constraint ``j`` bounds ``z_{l(j)}`` given the earlier ones from below (``A_{j l(j)} > 0``)
or above, so ``P = E_w prod_l [Phi(hi_l) - Phi(lo_l)]`` where ``z_l`` is drawn from
``N(0, 1)`` truncated to ``(lo_l, hi_l)`` by the inverse CDF at ``w_l``.  The last
factor is exact; ``w_0, ..., w_{r-2}`` are a fixed scrambled Sobol point set
(:func:`sobol_points`), so every result is deterministic and smooth in ``omega``.
Every factor is kept in log space (``log_ndtr``, ``ndtri_exp``), so the result is
relatively accurate in the tails, and each sample takes its three least likely constraints
(smallest ``mu_i / sqrt(C_ii)``) first, Genz's ordering, without which the estimate of a
small probability can be orders of magnitude off.  Several constraints on one ``z_l`` give
a bound that is a maximum (or minimum), which is how a dependent constraint enters.  The
rows of a batch are integrated together, each with the factor of its own order (one pass
over the columns for the whole batch, and one for all the faces below).

**Gradient (face formula).**  ``dP/d omega = sum_i d_i rho_i(0) P(u_{-i} > 0 | u_i = 0) / sqrt(V)``:
by the divergence theorem the derivative of a Gaussian mass with respect to its mean
is the density on the cone's boundary, face ``i`` carrying the density of ``u_i`` at 0
times the probability of the other constraints given ``u_i = 0`` (a cone of one
dimension less, computed by the same rule).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._lazy import LazyModule

special = LazyModule("scipy.special")   # loaded on first use: `import aimlib.channels` needs no SciPy
qmc = LazyModule("scipy.stats.qmc")     # loaded when a point set is first drawn

__all__ = ["sobol_points", "sobol_normals", "Cone", "QMC_POINTS", "SOBOL_SEED"]

#: default number of quasi-Monte Carlo points of one cone probability
QMC_POINTS = 1024
#: the fixed scramble of the Sobol point sets
SOBOL_SEED = 20260125
# rows of C whose residual variance is below this fraction are dependent
_RANK_TOL = 1e-10
# batch entries times points per block (memory of one block ~ m + 10 times 8 * this bytes)
_BLOCK = 1 << 20
# how many of the least likely constraints lead the order of separation of variables
_LEAD = 3


@lru_cache(maxsize=32)
def sobol_points(dim: int, n: int, seed: int | None = None) -> np.ndarray:
    """A fixed scrambled Sobol point set of ``n`` points in ``(0, 1)^dim`` (cached, read-only).

    ``n`` is rounded up to a power of two; the scramble is seeded with ``seed``, by default
    :data:`SOBOL_SEED` ``+ dim``.  The first ``k`` points of a set are the first ``k`` of
    every larger one with the same seed.  (``scipy.stats.qmc`` is imported on first use.)
    """
    if dim == 0:
        return np.zeros((1, 0))
    m = int(np.ceil(np.log2(max(n, 2))))
    pts = qmc.Sobol(dim, scramble=True, seed=SOBOL_SEED + dim if seed is None else seed).random_base2(m)
    pts = np.clip(pts, 1e-15, 1 - 1e-15)
    pts.setflags(write=False)
    return pts


@lru_cache(maxsize=8)
def sobol_normals(dim: int, n: int, seed: int | None = None) -> np.ndarray:
    """Standard normal quasi-random draws ``Phi^{-1}(w)`` on :func:`sobol_points` ``(dim, n, seed)``
    (``2^ceil(log2 n)`` rows, cached, read-only): the one Sobol set of every channel's
    quasi-Monte Carlo average."""
    z = special.ndtri(sobol_points(dim, n, seed))
    z.setflags(write=False)
    return z


def _factor(C):
    """Incremental Cholesky ``C = A A^T`` skipping dependent rows; returns ``(A, last)``.

    ``last[j]`` is the last column of row ``j`` that is not zero (``-1`` for a zero row)."""
    m = C.shape[0]
    A = np.zeros((m, m))
    k = 0
    for i in range(m):
        resid = C[i, i] - A[i, :k] @ A[i, :k]
        if resid > _RANK_TOL * max(C[i, i], 1e-300):
            A[i, k] = np.sqrt(resid)
            A[i + 1:, k] = (C[i + 1:, i] - A[i + 1:, :k] @ A[i, :k]) / A[i, k]
            k += 1
    A = A[:, :k]
    A[np.abs(A) < 1e-12] = 0.0
    nz = A != 0
    last = np.where(nz.any(axis=1), k - 1 - np.argmax(nz[:, ::-1], axis=1), -1)
    return A, last


def _log_interval(lo, hi):
    """``log(Phi(hi) - Phi(lo))`` (``-inf`` where ``hi <= lo``) and the flags ``lo > 0`` of the upper tail."""
    up = lo > 0
    a = np.where(up, -hi, lo)
    b = np.where(up, -lo, hi)
    la, lb = special.log_ndtr(a), special.log_ndtr(b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = lb + np.log1p(-np.exp(la - lb))
    out = np.where(hi > lo, out, -np.inf)
    return np.where(np.isnan(out), -np.inf, out), up, la


def _column(lo, hi, w):
    """One step of separation of variables: ``(log(Phi(hi) - Phi(lo)), z)``, ``z`` drawn at ``w``.

    ``lo`` or ``hi`` may be ``None`` (no bound) or hold infinite entries; a one-sided interval
    takes one ``log_ndtr`` and one ``ndtri_exp``.  ``w`` is ``None`` for the last, exact column."""
    if hi is None and lo is None:
        return 0.0, None if w is None else special.ndtri(w)
    if hi is None:
        ld = special.log_ndtr(-lo)
        return ld, None if w is None else -special.ndtri_exp(np.log1p(-w) + ld)
    if lo is None:
        ld = special.log_ndtr(hi)
        return ld, None if w is None else special.ndtri_exp(np.log(w) + ld)
    ld, up, la = _log_interval(lo, hi)
    if w is None:
        return ld, None
    lw = np.log(np.where(up, 1.0 - w, w))
    t = special.ndtri_exp(np.logaddexp(la, lw + ld))
    z = np.where(up, -t, t)
    return ld, np.where(np.isfinite(z), z, 0.0)


def _split_column(lo, hi, w):
    """:func:`_column` with the rows that have no upper bound (``hi = inf``) taken one-sided."""
    if lo is None or hi is None:
        return _column(lo, hi, w)
    two = np.isfinite(hi).any(axis=1)
    if two.all():
        return _column(lo, hi, w)
    ld = np.empty(lo.shape)
    z = None if w is None else np.empty(lo.shape)
    for rows, upper in ((~two, None), (two, hi[two])):
        ld[rows], zr = _column(lo[rows], upper, w)
        if z is not None:
            z[rows] = zr
    return ld, z


def _bound(s, a, mask, pick, empty):
    """The tightest of the bounds ``-s_j / a_j`` over the constraints ``j`` that ``mask`` selects.

    ``s`` has shape ``(m, B, N)``, ``a`` and ``mask`` ``(B, m)``; ``None`` if no row has one, and
    ``empty`` (an infinity) in the rows without one."""
    out = None
    for j in np.flatnonzero(mask.any(axis=0)):
        safe = np.where(mask[:, j], a[:, j], 1.0)[:, None]
        b = np.where(mask[:, j, None], -s[j] / safe, empty)
        out = b if out is None else pick(out, b)
    return out


def _sov(mu, A, last, w):
    r"""``log P(mu + A z > 0)`` for each row of ``mu`` (shape ``(B, m)``), averaged over the points ``w``.

    Each row has its own factor ``A`` (shape ``(B, m, r)``) and last columns ``last`` (``(B, m)``).
    The running sums ``s_j = mu_j + sum_{k < l} A_jk z_k`` are updated one column at a time, only
    for the constraints that bound a later column."""
    r = A.shape[2]
    const = np.all((last >= 0) | (mu > 0), axis=1)
    s = np.repeat(mu.T[:, :, None], w.shape[0], axis=2)
    logp = np.zeros(s.shape[1:])
    for col in range(r):
        a, on = A[:, :, col], last == col
        lo = _bound(s, a, on & (a > 0), np.maximum, -np.inf)
        hi = _bound(s, a, on & (a < 0), np.minimum, np.inf)
        ld, z = _split_column(lo, hi, w[:, col] if col < r - 1 else None)
        logp += ld
        if z is not None:
            for j in np.flatnonzero((last > col).any(axis=0)):
                s[j] += a[:, j, None] * z
    top = np.max(logp, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = top + np.log(np.mean(np.exp(logp - top[:, None]), axis=1))
    return np.where(const & np.isfinite(top), out, -np.inf)


def _sov_blocks(mu, A, last, n_points: int):
    """:func:`_sov` over blocks of rows, with the Sobol set of the factors' rank."""
    w = sobol_points(max(A.shape[2] - 1, 0), n_points)
    block = max(1, _BLOCK // w.shape[0])
    return np.concatenate([_sov(mu[s:s + block], A[s:s + block], last[s:s + block], w)
                           for s in range(0, len(mu), block)]) if len(mu) else np.empty(0)


class _Ordered:
    """One constraint system ``u ~ N(mu, C)`` and its factors, one per leading order of constraints.

    Separation of variables is accurate in the tails when the constraints least likely to hold
    come first (Genz's ordering): each sample puts its ``_LEAD`` smallest ``mu_i / sqrt(C_ii)``
    first, the rest in their own order, and the factor of that order is computed once.  The
    rank of ``C`` does not depend on the order; a factor of lower numerical rank is padded
    with zero columns (no constraint, a factor 1)."""

    def __init__(self, C):
        self.C = C
        self.sd = np.sqrt(np.diag(C))
        self.factors = {}

    def _factor(self, order: tuple):
        if order not in self.factors:
            self.factors[order] = _factor(self.C[np.ix_(order, order)])
        return self.factors[order]

    def arrange(self, mu):
        """``(mu, A, last)`` per row: ``mu`` in the row's order, and that order's factor."""
        m = mu.shape[1]
        lead = np.argsort(mu / self.sd, axis=1, kind="stable")[:, :min(_LEAD, m)]
        keys, inverse = np.unique(lead, axis=0, return_inverse=True)
        orders = np.array([np.concatenate([key, [j for j in range(m) if j not in key]]) for key in keys], dtype=int)
        facs = [self._factor(tuple(o)) for o in orders]
        r = max(f[0].shape[1] for f in facs)
        As = np.zeros((len(facs), m, r))
        for k, (A, _) in enumerate(facs):
            As[k, :, :A.shape[1]] = A
        lasts = np.array([f[1] for f in facs])
        inverse = inverse.ravel()
        return np.take_along_axis(mu, orders[inverse], axis=1), As[inverse], lasts[inverse]

    def log_prob(self, mu, n_points: int):
        return _sov_blocks(*self.arrange(mu), n_points)


class Cone:
    r"""The cone ``D h > 0`` for ``h ~ N(omega, V diag(s2))``: ``log P`` and ``d log P / d omega``.

    Parameters
    ----------
    D : array of shape (m, n)
        The constraints (rows ``d_i``).
    s2 : array of shape (n,)
        The variance shape of the independent entries of ``h``.
    n_points : int
        Quasi-Monte Carlo points per probability (see the module docstring).
    """

    def __init__(self, D, s2, n_points: int = QMC_POINTS):
        self.D = np.asarray(D, dtype=float)
        self.C = self.D @ (np.asarray(s2, dtype=float)[:, None] * self.D.T)
        self.n_points = int(n_points)
        self.main = _Ordered(self.C)
        self.faces = []
        for i in range(self.D.shape[0]):
            c = self.C[:, i] / self.C[i, i]
            keep = np.arange(self.D.shape[0]) != i
            self.faces.append((keep, c[keep], _Ordered((self.C - np.outer(c, self.C[i]))[np.ix_(keep, keep)])))

    def log_prob(self, omega, V):
        """``log P(D h > 0)`` for each row of ``omega`` (shape ``(B, n)``); ``V`` scalar or ``(B,)``."""
        mu = np.atleast_2d(omega) @ self.D.T / np.sqrt(np.asarray(V, dtype=float))[..., None]
        return self.main.log_prob(mu, self.n_points)

    def log_prob_and_grad(self, omega, V):
        r"""``(log P, d log P / d omega)`` by the face formula; shapes ``(B,)`` and ``(B, n)``."""
        sv = np.sqrt(np.broadcast_to(np.asarray(V, dtype=float), (np.atleast_2d(omega).shape[0],)))
        mu = np.atleast_2d(omega) @ self.D.T / sv[:, None]
        logp = self.main.log_prob(mu, self.n_points)
        # every face's lower-dimensional probability in one batch (faces share m - 1 and the rank)
        parts = [system.arrange(mu[:, keep] - mu[:, i, None] * c)
                 for i, (keep, c, system) in enumerate(self.faces)]
        r = max(A.shape[2] for _, A, _ in parts)
        A = np.concatenate([np.pad(A, ((0, 0), (0, 0), (0, r - A.shape[2]))) for _, A, _ in parts])
        cond = _sov_blocks(np.concatenate([p[0] for p in parts]), A,
                           np.concatenate([p[2] for p in parts]), self.n_points)
        sd = np.sqrt(np.diag(self.C))
        dens = -0.5 * (mu / sd) ** 2 - np.log(sd * np.sqrt(2 * np.pi))
        face = dens + cond.reshape(len(self.faces), -1).T
        with np.errstate(invalid="ignore", over="ignore"):
            ratio = np.exp(face - logp[:, None])
        ratio = np.where(np.isfinite(logp)[:, None], ratio, 0.0)
        return logp, (ratio @ self.D) / sv[:, None]
