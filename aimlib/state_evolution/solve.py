"""The state-evolution fixed point at one or many sample complexities, by the fastest exact route.

Noiseless linear-type channels (``F_out = k / V``) are solved in closed form
(:mod:`~aimlib.state_evolution.closed`), every other channel is iterated
(:mod:`~aimlib.state_evolution.fixed_point`).  Each point is solved to the
requested tolerance of its own equation: a value depends on which other points
were asked for only within that tolerance (the closed form's shared table of
prior-MMSE evaluations and the iteration's warm starts only save work).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..channels import make_channel
from ..priors import make_priors
from .closed import solve_closed, solve_closed_many
from .fixed_point import SEResult, fixed_point

__all__ = ["SECurve", "solve", "curve"]


@dataclass(frozen=True)
class SECurve:
    """State evolution along a list of sample complexities (arrays in the input order).

    For a channel with ``L > 1`` indices, ``mmse``, ``q`` and ``qhat`` have shape ``(n, L)``.
    ``prediction`` says what the errors are (:data:`~aimlib.state_evolution.fixed_point.PREDICTIONS`).
    """

    alpha: np.ndarray
    mmse: np.ndarray
    q: np.ndarray
    qhat: np.ndarray
    iterations: np.ndarray
    method: str
    evaluations: int = 0
    prediction: str = "bayes"

    def __len__(self) -> int:
        return len(self.alpha)


def _setup(T, rho, channel, beta, noise, method):
    """Validate; return ``(T, priors, channel, method, k)`` with ``k`` set for the closed form.

    The closed form needs a noiseless linear-type channel (``F_out = k/V``) and one
    prior with one sector.
    """
    T = v.integer("T", T, minimum=2)
    ch = make_channel(channel, beta=beta, noise=noise)
    v.choice("method", method, {"auto", "closed", "iterate"})
    priors = make_priors(ch, rho)
    k = ch.linear_k(T) if len(priors) == 1 and len(priors[0].sectors) == 1 else None
    if method == "closed" and k is None:
        raise ValueError(f"method='closed' needs a noiseless softmax or linear channel and a prior of "
                         f"one sector, got {ch!r} and {priors}")
    meth = method if method != "auto" else ("closed" if k is not None else "iterate")
    return T, priors, ch, meth, k


def _closed_result(alpha, V, delta, evals, trace, prior) -> SEResult:
    Q0 = prior.second_moment()
    qhat = math.inf if delta == 0 else (0.0 if math.isinf(delta) else 1.0 / delta)
    return SEResult(alpha=alpha, mmse=V, q=Q0 - V, qhat=qhat, iterations=evals,
                    trace=np.asarray(trace, dtype=float), method="closed")


def solve(alpha: float, channel="softmax", *, T: int = 2, rho=0.5, beta: float | None = None,
          noise: float | None = None, method: str = "auto", tol: float = 1e-12,
          guess: float | None = None, **iterate_kw) -> SEResult:
    r"""The SE fixed point at one ``alpha``, by the closed form where it applies, else by iteration.

    ``method='closed'`` (the default for the noiseless softmax and linear channels, one prior of
    one sector) solves ``V = mmse_S(V / alpha_bar)``, ``alpha_bar = k alpha``, by a root find in
    ``log Delta``; ``'iterate'`` runs :func:`~aimlib.state_evolution.fixed_point.fixed_point`.

    Channels and sequence lengths: the softmax (``beta`` finite or not, with or without label
    ``noise``) and the linear channel at any ``T >= 2``; the hardmax at ``T = 2`` (quadrature)
    and ``T = 3`` (the tabulated :math:`\mathcal F_3`, :mod:`aimlib.channels.hardmax_polytope`,
    for errors down to about ``1/LAMBDA_MAX`` of the overlap); several layers
    (``'deep-hardmax'``, one prior per layer) at ``T = 2``.  A larger ``T`` raises
    ``ValueError`` (the limits are :data:`aimlib.channels.registry.MAX_T`).

    Parameters
    ----------
    alpha : float
        Sample complexity ``n / d^2``, ``>= 0``.
    channel : str or Channel
        ``'softmax'``, ``'hardmax'``, ``'linear'``, ``'deep-hardmax'`` or an instance
        (:func:`aimlib.channels.make_channel`).
    T : int
        Tokens per sequence, ``>= 2`` (and within the channel's limit above).
    rho : float, Prior, or a sequence of them (one per index)
        Width ratio of the Wishart prior (``inf``: the Gaussian prior,
        :func:`aimlib.priors.make_prior`) or a prior.
    beta, noise : float or None
        Inverse temperature and label-noise variance when ``channel`` is a name.
    method : {'auto', 'closed', 'iterate'}
        ``'closed'`` needs a noiseless softmax or linear channel and a prior of one sector.
    tol : float
        Tolerance: on ``log Delta`` (closed form), on the step in ``V`` (iteration; at least
        ``1e-13``).
    guess : float or None
        Starting ``log Delta`` of the closed form's root find.
    **iterate_kw
        Options of the iteration: ``damping``, ``max_iter``, ``init``, ``on_max_iter``, ``stop``;
        ``TypeError`` with the closed form.

    Returns
    -------
    SEResult
        ``mmse`` (the estimation error ``E_S = V``), ``q``, ``qhat``, ``iterations``, ``trace``,
        ``method`` and ``prediction`` (:class:`~aimlib.state_evolution.fixed_point.SEResult`;
        arrays of ``L`` entries for ``L`` indices).

    Raises
    ------
    ValueError
        An argument out of its range, or a ``T`` beyond the channel's limit.
    aimlib.ConvergenceError
        The iteration diverged, or reached ``max_iter`` (``on_max_iter='raise'``).

    Examples
    --------
    >>> from aimlib.state_evolution import solve
    >>> round(solve(0.05, "softmax", T=2, rho=0.5).mmse, 4)
    0.7237
    >>> round(solve(1.0, "hardmax", T=3, rho=0.5).mmse, 4)
    0.0189
    """
    alpha = v.nonnegative("alpha", alpha)
    T, priors, ch, meth, k = _setup(T, rho, channel, beta, noise, method)
    tol = v.positive("tol", tol)
    if meth == "iterate":
        return fixed_point(alpha, ch, T=T, rho=priors, tol=max(tol, 1e-13), **iterate_kw)
    if iterate_kw:
        raise TypeError(f"unexpected arguments for method='closed': {sorted(iterate_kw)}")
    prior = priors[0]
    V, delta, evals, trace = solve_closed(k * alpha, prior.mmse, prior.zero_slope(), guess, tol)
    return _closed_result(alpha, V, delta, evals, trace, prior)


def _alphas(alphas) -> np.ndarray:
    a = np.asarray(alphas, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"alphas must be a non-empty 1-d sequence, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError("alphas must be finite and >= 0")
    return a


def curve(alphas, channel="softmax", *, T: int = 2, rho=0.5, beta: float | None = None,
          noise: float | None = None, method: str = "auto", tol: float = 1e-12, warm_start: bool = True,
          **iterate_kw) -> SECurve:
    r"""SE fixed points along ``alphas`` (any order; results in the input order).

    The channels, ``T`` and priors are those of :func:`solve`, with the same parameters
    (``alphas`` a non-empty sequence of sample complexities ``>= 0`` in place of ``alpha``,
    no ``guess``).

    Closed form: the points are solved together (:func:`~aimlib.state_evolution.closed.solve_closed_many`):
    every prior-MMSE evaluation enters one table of ``log mmse_S(Delta) - log Delta``, the
    same function of ``Delta`` for every ``alpha``, from which each root is interpolated and
    then checked by about one new evaluation next to it; each value is its own root to
    ``tol`` in ``log Delta``, as from :func:`solve` (``warm_start=False``: every point alone).
    Iterated channels: the points are solved in increasing ``alpha``, each starting from the
    previous ``V`` when ``warm_start`` (following a branch of fixed points continuously;
    ``warm_start=False`` starts every point from the uninformative ``V = 1``).

    Parameters
    ----------
    alphas : sequence of float
        Sample complexities, finite and ``>= 0``.
    channel, T, rho, beta, noise, method, tol, **iterate_kw
        As for :func:`solve`.
    warm_start : bool
        Share the closed form's table, or start each iteration from the previous point.

    Returns
    -------
    SECurve
        ``alpha``, ``mmse``, ``q``, ``qhat``, ``iterations`` (per point) and
        ``evaluations`` (prior-MMSE calls of the closed form).

    Examples
    --------
    >>> from aimlib.state_evolution import curve
    >>> curve([0.05, 0.1], "softmax", T=2, rho=0.5).mmse.round(3).tolist()
    [0.724, 0.392]
    """
    a = _alphas(alphas)
    T, priors, ch, meth, k = _setup(T, rho, channel, beta, noise, method)
    tol = v.positive("tol", tol)
    order = np.argsort(a, kind="stable")
    results = [None] * a.size
    if meth == "closed":
        if iterate_kw:
            raise TypeError(f"unexpected arguments for method='closed': {sorted(iterate_kw)}")
        prior = priors[0]
        abars = [k * float(a[i]) for i in order]
        if warm_start:
            sols = solve_closed_many(abars, prior.mmse, prior.zero_slope(), tol)
        else:
            sols = [solve_closed(x, prior.mmse, prior.zero_slope(), None, tol)[:3] for x in abars]
        for i, (V, delta, evals) in zip(order, sols):
            results[i] = _closed_result(float(a[i]), V, delta, evals, [V], prior)
    else:
        init = iterate_kw.pop("init", None)
        for i in order:
            r = fixed_point(float(a[i]), ch, T=T, rho=priors, tol=max(tol, 1e-13), init=init, **iterate_kw)
            init = r.mmse if warm_start else init
            results[i] = r
    evaluations = sum(r.iterations for r in results) if meth == "closed" else 0
    col = {key: np.array([getattr(r, key) for r in results], dtype=float) for key in ("mmse", "q", "qhat")}
    return SECurve(alpha=a.copy(), iterations=np.array([r.iterations for r in results]), method=meth,
                   evaluations=int(evaluations), prediction=results[0].prediction, **col)
