r"""The hardmax Bayes side at any ``T``: the output as a polyhedral cone of the indices.

Row ``a`` of the output is one-hot at ``c_a = argmax_b h_ab``, so an output is a
pattern ``c = (c_1, ..., c_T)`` and fixes ``T (T - 1)`` inequalities
``h_{a c_a} > h_ab`` (``b != c_a``) on the ``n = T (T + 1)/2`` independent entries of the
symmetric ``h ~ N(omega, V Sigma)``.  Hence

.. math::  Z_{\rm out}(c) = P(D_c h > 0),\qquad
           g = \partial_\omega \log Z_{\rm out} = \frac{1}{\sqrt V\, Z_{\rm out}}
               \sum_i d_i\, \rho_i(0)\, P(u_{-i} > 0 \mid u_i = 0),

the face formula of :mod:`aimlib.channels.polytope`, with ``u = D_c h / sqrt(V)``.

**Which patterns occur.**  Each inequality compares two entries of one row, and two
entries share at most one row, so the inequalities are the edges of a directed graph on
the ``n`` entries.  A pattern is possible iff that graph has no directed cycle.  At
``T = 3`` the off-diagonal entries ``h_12, h_13, h_23`` form a triangle (row 1 compares
``h_12, h_13`` when ``c_1 != 1``, and so on); the cyclic patterns ``c = (2, 3, 1)`` and
``(3, 1, 2)`` orient it as ``h_12 > h_13 > h_23 > h_12``
and ``h_13 > h_12 > h_23 > h_13``, which no symmetric ``h`` satisfies: 25 of the 27 row
patterns occur.  The ``T (T - 1)`` inequalities have rank ``n - 1`` (adding a constant to
every entry changes no argmax), so they are linearly dependent; the cone computation
handles the dependent ones as extra bounds (the module docstring of :mod:`.polytope`).

**State evolution.**  The output is invariant under ``h -> h / sqrt(V)``, so
``F_out(q, V) = 𝓕_T(lambda) / V`` with ``lambda = q / V`` and

.. math::  \mathcal F_T(\lambda) = 2 \sum_{a \le b} \Sigma_{ab}\, \mathbb E_{\omega \sim N(0, \lambda\Sigma)}
           \sum_c Z_{\rm out}(c)\, g_{ab}^2 \Big|_{V = 1},

computed by :func:`fisher_scaled_direct` (the outer average over ``omega`` by a fixed
scrambled Sobol set, one pattern per orbit of the token permutations) and tabulated
by ``scripts/make_hardmax_polytope_tables.py`` (:func:`fisher_scaled` reads the table).
"""
from __future__ import annotations

import itertools
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import _validate as v
from .._lazy import LazyModule
from ..backend import get_array_module, to_device, to_host
from .base import sigma2
from .polytope import Cone, sobol_points

special = LazyModule("scipy.special")   # loaded on first use: `import aimlib.channels` needs no SciPy

__all__ = ["patterns", "constraint_matrix", "pattern_cone", "pattern_index", "log_partition", "g_out",
           "probabilities", "fisher_scaled_direct", "fisher_scaled", "fisher", "weak_recovery_threshold",
           "TABLES", "LAMBDA_MAX", "MAX_T", "THRESHOLD_MAX_T", "check_T", "table_nodes", "write_table", "load_table",
           "OutsideTable"]

#: the largest ``T`` whose Bayes side is offered (the cones grow like ``T^2`` constraints)
MAX_T = 3
#: the largest ``T`` of :func:`weak_recovery_threshold` (a single point, no table)
THRESHOLD_MAX_T = 4
#: ``F_out``'s table covers ``0 <= lambda <= LAMBDA_MAX``
LAMBDA_MAX = 1000.0
#: the shipped table of ``𝓕_T``
TABLES = Path(__file__).resolve().parents[1] / "data" / "hardmax_polytope_tables.npz"
# quasi-Monte Carlo points: of one cone probability, and of the outer average over omega
_INNER = 256
_OUTER_LOG2 = 14
_OUTER_SEED = 7919
_CHEB_DEG = 12
_LOG_P_FLOOR = -600.0


def check_T(T) -> int:
    """``T`` as an int in ``[2, MAX_T]``, or a ``ValueError`` saying why not."""
    T = v.integer("T", T, minimum=2)
    if T > MAX_T:
        raise ValueError(f"T must be <= {MAX_T} for the hardmax Bayes side: each output is a Gaussian "
                         f"cone of T(T-1) = {T * (T - 1)} inequalities in {T * (T + 1) // 2} dimensions, "
                         f"beyond the tabulated and tested range, got T={T}")
    return T


def _entries(T: int):
    iu = np.triu_indices(T)
    index = {}
    for k, (a, b) in enumerate(zip(*iu)):
        index[(a, b)] = index[(b, a)] = k
    return iu, index


def constraint_matrix(pattern) -> np.ndarray:
    """The rows ``d = e_{a c_a} - e_{ab}`` (``b != c_a``) over the entries ``a <= b`` (row-major)."""
    T = len(pattern)
    iu, index = _entries(T)
    rows = []
    for a, c in enumerate(pattern):
        for b in range(T):
            if b != c:
                d = np.zeros(len(iu[0]))
                d[index[(a, c)]] += 1.0
                d[index[(a, b)]] -= 1.0
                rows.append(d)
    return np.array(rows)


def _acyclic(pattern) -> bool:
    """Whether the inequalities of ``pattern`` (edges winner -> loser) have no directed cycle."""
    D = constraint_matrix(pattern)
    edges = {(int(np.argmax(d)), int(np.argmin(d))) for d in D}
    nodes = set(range(D.shape[1]))
    while nodes:
        sources = [x for x in nodes if not any(e[1] == x and e[0] in nodes for e in edges)]
        if not sources:
            return False
        nodes -= set(sources)
    return True


@lru_cache(maxsize=8)
def patterns(T: int) -> tuple:
    """The possible argmax patterns ``(c_1, ..., c_T)`` (0-based), in lexicographic order."""
    return tuple(p for p in itertools.product(range(T), repeat=T) if _acyclic(p))


@lru_cache(maxsize=256)
def pattern_cone(pattern: tuple, n_points: int = _INNER) -> Cone:
    """The :class:`~aimlib.channels.polytope.Cone` of one pattern (cached)."""
    T = len(pattern)
    return Cone(constraint_matrix(pattern), sigma2(T)[np.triu_indices(T)], n_points)


def pattern_index(y) -> np.ndarray:
    """Argmax patterns ``(..., T)`` of one-hot outputs ``(..., T, T)``, checked."""
    y = to_host(v.finite_array("y", y))
    if y.ndim < 2 or y.shape[-1] != y.shape[-2]:
        raise ValueError(f"y must have shape (..., T, T) (one-hot rows), got {tuple(y.shape)}")
    if not (np.all((y == 0) | (y == 1)) and np.all(y.sum(axis=-1) == 1)):
        raise ValueError("y must have one-hot rows (entries 0/1, one 1 per row): the noiseless hardmax output")
    return np.argmax(y, axis=-1)


def _inputs(y, omega, V):
    xp = get_array_module(y, omega)
    omega = to_host(v.finite_array("omega", omega))
    if omega.ndim < 2 or omega.shape[-1] != omega.shape[-2]:
        raise ValueError(f"omega must have shape (..., T, T), got {tuple(omega.shape)}")
    T = check_T(omega.shape[-1])
    c = pattern_index(y)
    if c.shape != omega.shape[:-1]:
        raise ValueError(f"y and omega must have the same shape (..., {T}, {T}), got "
                         f"{tuple(np.shape(y))} vs {tuple(omega.shape)}")
    V = np.asarray(to_host(V), dtype=float)
    if not (np.all(np.isfinite(V)) and np.all(V > 0)):
        raise ValueError("V must be finite and > 0 (the posterior variance of the indices)")
    batch = omega.shape[:-2]
    iu = np.triu_indices(T)
    o = 0.5 * (omega + np.swapaxes(omega, -1, -2))[..., iu[0], iu[1]].reshape(-1, len(iu[0]))
    return xp, T, c.reshape(-1, T), o, np.broadcast_to(V, batch).reshape(-1), batch


def _by_pattern(c, o, V, grad: bool):
    logp = np.empty(o.shape[0])
    g = np.zeros(o.shape) if grad else None
    keys = [tuple(int(x) for x in row) for row in c]
    for p in set(keys):
        sel = np.array([k == p for k in keys])
        cone = pattern_cone(p)
        if grad:
            logp[sel], g[sel] = cone.log_prob_and_grad(o[sel], V[sel])
        else:
            logp[sel] = cone.log_prob(o[sel], V[sel])
    return logp, g


def log_partition(y, omega, V):
    r"""``log Z_out = log P(y | omega, V)``, the Gaussian mass of the output's cone.

    Parameters
    ----------
    y : array of shape (..., T, T)
        One-hot hardmax outputs; a cyclic (impossible) pattern gives ``-inf``.
    omega : array of shape (..., T, T)
        Mean of the indices (``omega_ab``, ``a < b``, read as the average of the two entries).
    V : float or array broadcastable to ``omega.shape[:-2]``
        Fluctuation variance ``V > 0``: ``h ~ N(omega, V Sigma)``.
    """
    xp, T, c, o, V, batch = _inputs(y, omega, V)
    logp, _ = _by_pattern(c, o, V, grad=False)
    return to_device(logp.reshape(batch), xp)


def g_out(y, omega, V):
    r"""``g_ab = d log Z_out / d omega_ab`` (independent entries ``a <= b``) by the face formula.

    Parameters are those of :func:`log_partition`; the result has the shape of ``omega``,
    symmetric in its last two axes.  An impossible output raises ``ValueError``.
    """
    xp, T, c, o, V, batch = _inputs(y, omega, V)
    logp, g = _by_pattern(c, o, V, grad=True)
    if not np.all(np.isfinite(logp)):
        raise ValueError("y holds an impossible hardmax output (a cyclic argmax pattern)")
    iu = np.triu_indices(T)
    out = np.zeros((len(c), T, T))
    out[:, iu[0], iu[1]] = g
    out[:, iu[1], iu[0]] = g
    return to_device(out.reshape(batch + (T, T)), xp)


def probabilities(omega, V):
    """``P(c | omega, V)`` for the patterns of :func:`patterns` (last axis, in that order)."""
    omega = to_host(v.finite_array("omega", omega))
    T = check_T(omega.shape[-1])
    eye = np.eye(T)
    outs = [np.exp(log_partition(np.broadcast_to(eye[list(p)], omega.shape), omega, V))
            for p in patterns(T)]
    return np.stack(outs, axis=-1)


def _orbits(T: int):
    """One pattern per orbit of the token permutations, with the orbit's size."""
    seen, reps = set(), []
    for p in patterns(T):
        if p in seen:
            continue
        orbit = {tuple(s[p[s.index(a)]] for a in range(T)) for s in itertools.permutations(range(T))}
        seen |= orbit
        reps.append((p, len(orbit)))
    return reps


def _fisher_sum(T: int, omega, n_points: int):
    """``sum_c Z(c) 2 sum_{a<=b} Sigma_ab g_ab^2`` at ``V = 1`` for each row of ``omega`` (entries ``a <= b``)."""
    w = 2.0 * sigma2(T)[np.triu_indices(T)]
    total = np.zeros(omega.shape[0])
    for p, size in _orbits(T):
        logp, g = pattern_cone(p, n_points).log_prob_and_grad(omega, 1.0)
        # an output of probability below e^-600 adds nothing, and there the cone's estimate,
        # not its faces', loses its relative accuracy (the ratio of the face formula can overflow)
        live = logp > _LOG_P_FLOOR
        total[live] += size * np.exp(logp[live]) * (g[live] ** 2 @ w)
    return total


def fisher_scaled_direct(lam: float, T: int, *, outer_log2: int = _OUTER_LOG2, n_points: int = _INNER,
                         seed: int = _OUTER_SEED) -> float:
    r"""``𝓕_T(lambda) = V F_out`` at ``lambda = q/V`` by nested quasi-Monte Carlo (see the module docstring).

    ``omega / sqrt(V) ~ N(0, lambda Sigma)`` runs over ``2^outer_log2`` scrambled Sobol points;
    each cone probability and face uses ``n_points`` points.  The output ignores a common
    shift of the entries, so ``omega`` is drawn projected along it (``n - 1`` dimensions);
    ``seed`` is the outer scramble's.  At ``lambda = 0`` the outer average is a single point.
    """
    T = check_T(T)
    lam = v.in_range("lam", lam, 0.0, math.inf)
    iu = np.triu_indices(T)
    s2 = np.where(iu[0] == iu[1], 2.0, 1.0)
    if lam == 0:
        return float(_fisher_sum(T, np.zeros((1, len(s2))), n_points)[0])
    # the output ignores a common shift of the entries: average over omega's law projected
    # along it, N(0, lambda (S - 1 1^T / 1^T S^-1 1)) of rank n - 1
    one = np.ones(len(s2))
    evals, evecs = np.linalg.eigh(np.diag(s2) - np.outer(one, one) / np.sum(1.0 / s2))
    M = evecs[:, 1:] * np.sqrt(lam * evals[1:])
    omega = special.ndtri(sobol_points(len(s2) - 1, 1 << outer_log2, seed)) @ M.T
    return float(np.mean(_fisher_sum(T, omega, n_points)))


def weak_recovery_threshold(T: int) -> float:
    r"""``alpha_bar_WR(T) = 1 / 𝓕_T(0)``: the ``rho -> 0`` weak-recovery threshold in ``alpha / rho``.

    At ``q = 0`` the mean ``omega`` vanishes, so ``𝓕_T(0)`` is one deterministic sum over
    the patterns of ``Z (2 sum Sigma_ab g_ab^2)`` at ``omega = 0`` (no outer average, 2^14
    points per cone); at ``T = 2`` it is the closed form of
    :func:`aimlib.channels.hardmax.weak_recovery_threshold`.  Offered up to
    :data:`THRESHOLD_MAX_T` (``T = 4``: 218 patterns in 16 orbits, some ten seconds).
    """
    T = v.integer("T", T, minimum=2)
    if T > THRESHOLD_MAX_T:
        raise ValueError(f"T must be <= {THRESHOLD_MAX_T} for the hardmax weak-recovery threshold (the "
                         f"patterns and cone dimensions grow with T: {T * (T - 1)} inequalities in "
                         f"{T * (T + 1) // 2} dimensions), got T={T}")
    return 1.0 / float(_fisher_sum(T, np.zeros((1, T * (T + 1) // 2)), 1 << 14)[0])


# -- the table of 𝓕_T: Chebyshev interpolant of H(x) = 𝓕_T(lambda) sqrt(1 + lambda), x = 1/sqrt(1 + lambda)
_X_MIN = 1.0 / math.sqrt(1.0 + LAMBDA_MAX)


def table_nodes(deg: int = _CHEB_DEG) -> np.ndarray:
    """The ``lambda`` values at the Chebyshev nodes of the table (``deg + 1`` of them)."""
    u = np.cos(np.pi * (np.arange(deg + 1) + 0.5) / (deg + 1))
    x = _X_MIN + (1.0 - _X_MIN) * (u + 1) / 2
    return 1.0 / x**2 - 1.0


def _settings() -> np.ndarray:
    return np.array([LAMBDA_MAX, _CHEB_DEG, _INNER, _OUTER_LOG2], dtype=float)


def write_table(path=None, Ts=(3,)) -> Path:
    """Build the tables of ``Ts`` and store them with their node values at ``path`` (default: the shipped
    :data:`TABLES`; ``scripts/make_hardmax_polytope_tables.py``)."""
    path = TABLES if path is None else path
    lam = table_nodes()
    arrays = {}
    for T in Ts:
        vals = np.array([fisher_scaled_direct(t, T) for t in lam])
        u = np.cos(np.pi * (np.arange(_CHEB_DEG + 1) + 0.5) / (_CHEB_DEG + 1))
        arrays[f"coef_T{T}"] = np.polynomial.chebyshev.chebfit(u, vals * np.sqrt(1 + lam), _CHEB_DEG)
        arrays[f"values_T{T}"] = vals
    np.savez(path, T=np.array(Ts), tau=lam, settings=_settings(), **arrays)
    return Path(path)


@lru_cache(maxsize=1)
def load_table() -> dict:
    """The shipped coefficients by ``T`` (``{T: coef}``), read from :data:`TABLES`."""
    if not TABLES.is_file():
        raise FileNotFoundError(f"{TABLES} is missing: make it with scripts/make_hardmax_polytope_tables.py")
    with np.load(TABLES) as f:
        settings, expected = f["settings"], _settings()
        if not np.array_equal(settings, expected):
            raise ValueError(f"{TABLES.name} was built with settings {settings.tolist()}, the module "
                             f"uses {expected.tolist()}: rebuild it with scripts/make_hardmax_polytope_tables.py")
        return {int(T): f[f"coef_T{int(T)}"] for T in f["T"]}


class OutsideTable(ValueError):
    """``q/V`` outside ``[0, LAMBDA_MAX]``, where the shipped table of :func:`fisher_scaled` holds no value."""


def fisher_scaled(lam, T: int):
    r"""``𝓕_T(lambda)`` from the shipped table (``0 <= lambda <= LAMBDA_MAX``; ``T = 2`` or ``3``).

    Raises :class:`OutsideTable` (a ``ValueError``) for ``lambda`` outside that range.
    """
    T = check_T(T)
    lam = np.asarray(lam, dtype=float)
    if not np.all(np.isfinite(lam)) or np.any(lam < 0) or np.any(lam > LAMBDA_MAX):
        raise OutsideTable(f"the hardmax T = {T} output function is tabulated for q/V in [0, {LAMBDA_MAX:g}] "
                         f"(errors down to 1/{LAMBDA_MAX:g} of the overlap), got {float(np.max(lam)):.4g}: "
                         "at this sample complexity the error is below the table's range; lower alpha")
    x = 1.0 / np.sqrt(1.0 + lam)
    u = 2.0 * (x - _X_MIN) / (1.0 - _X_MIN) - 1.0
    out = np.polynomial.chebyshev.chebval(u, load_table()[T]) * x
    return float(out) if out.ndim == 0 else out


def fisher(q, Q0, T: int) -> float:
    r"""``F_out(q) = 𝓕_T(q/V)/V``, ``V = Q0 - q`` (tabulated; see :func:`fisher_scaled`)."""
    Q0 = v.positive("Q0", Q0)
    q = v.real("q", q)
    if not 0 <= q < Q0:
        raise ValueError(f"q must be in [0, Q0) = [0, {Q0:g}), got {q!r}")
    V = Q0 - q
    return fisher_scaled(q / V, T) / V
