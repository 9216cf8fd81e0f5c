r"""The state evolution of two-layer GAMP-RIE that carries the cross overlap and the mixing.

GAMP-RIE with one denoiser per layer (book, chapter "Correlated layers") leaves its two
estimates a residual cross-covariance ``e_12``.  Under the law of the indices given such
estimates (:func:`aimlib.channels.deep_moments.draw_law`) the backward pass is
``B = alpha(Gamma S + Lambda S_hat) + (alpha F)^{1/2} xi``, so the layers' inputs are

.. math::  R = F^{-1}\Gamma\,S + (I + F^{-1}\Lambda)\,\hat S + (\alpha F)^{-1/2}\xi ,

with the noises ``Delta_l = (F^{-1})_ll/alpha`` of correlation ``kappa = -F_12/sqrt(F_11 F_22)``
(:func:`~aimlib.priors.correlated.layer_noises`) and the mixing ``a_lk = (F^{-1}Gamma)_lk``, the part
of the other layer's centred teacher ``C_k`` in ``R_l``.  The state is ``(q_1, q_2, e_12)``; one step is

1. the channel side at that state: ``F`` and ``Gamma`` by Monte Carlo under the law with ``e_12``
   (:func:`~aimlib.channels.deep_moments.response_moments`, the same draws at every step, so that the
   map is a fixed function of the state), hence ``Delta_l``, ``kappa``, ``a_12``, ``a_21``;
2. the prior side (:func:`first_order_prior`, the default) to first order in ``(kappa, a_12, a_21)``
   (:func:`~aimlib.priors.correlated.cross_residual`):

   .. math::  \mathrm{mmse}_l = \mathrm{mmse}_{S_l}(\Delta_l),\qquad
              e_{12} = \mathrm{mmse}_1\mathrm{mmse}_2\Big(\frac{\kappa}{\sqrt{\Delta_1\Delta_2}}
                       - \frac{a_{12}}{\Delta_1} - \frac{a_{21}}{\Delta_2}\Big),

   ``q_l = Q0_l - mmse_l``.  The memory ``(I + F^{-1}Lambda)_lk`` carries the other layer's centred
   estimate, orthogonal to its residual, and adds nothing at this order; the diagonal of the mixing
   (one up to ``O(e_12)``) is kept at one and reported (``first_order_prior(..., diagonal=True)`` feeds it back,
   ``mmse_l(Delta_l / A_ll^2)``).  To all orders, with the whole mixing ``A`` and
   memory ``B``: :func:`measured_prior`, two RIEs measured at size ``d`` on fixed instances.

Three layers with centred teachers (book, chapter "Correlated layers", section "Three layers"): the flip of
layer 3 keeps ``F``, ``Gamma`` and ``Lambda`` zero between layer 3 and the others under the law with ``e_12``
(layer 3's draws enter alone), so layers 1 and 2 are the pair above, with the upper-left blocks, and layer 3
sees its own noise ``Delta_3 = 1/(alpha F_33)``: ``mmse_3 = mmse_{S_3}(Delta_3)``.  The state is
``(q_1, q_2, q_3, e_12)``.  Three layers are iterated as :func:`three_layers` says.

The iteration is damped, ``x <- damping x + (1 - damping) step(x)``, until a step moves no component
by more than ``tol/4`` (a slow contraction leaves the fixed point several steps away), or with
``rule='window'`` until the distance left, estimated from the contraction, is that small; it is then taken
``further`` iterations on, and every one of those iterates must stay within ``tol`` of the declared
point (else :class:`~aimlib.errors.ConvergenceError`).  With
``e_12`` and the mixing forced to zero (``side=separable_side(...)``) the map is the separable state
evolution (:func:`~aimlib.state_evolution.fixed_point`).  What the fixed point carries of the Monte
Carlo is its draws' error: runs with independent draws (``seed``) give its spread.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..channels.base import Channel
from ..channels.deep_moments import response_moments
from ..errors import ConvergenceError
from ..iteration import iterate_map, taken_further
from ..priors.correlated import cross_residual, layer_noises, measure_cross_residual
from .fixed_point import components

__all__ = ["CrossFixedPoint", "ChannelSide", "monte_carlo_side", "separable_side", "first_order_prior",
           "measured_shifts", "measured_prior", "cross_fixed_point", "three_layers"]



@dataclass(frozen=True)
class ChannelSide:
    """What one channel-side evaluation hands the prior side: the moment matrix ``F`` (without
    ``alpha``), the mixing ``F^{-1} Gamma``, the mixing's standard errors (zeros where exact) and the
    memory ``I + F^{-1} Lambda`` (``None`` where it was not computed), each ``L x L`` for ``L`` layers."""

    F: np.ndarray
    mixing: np.ndarray
    mixing_se: np.ndarray
    memory: np.ndarray | None = None


@dataclass(frozen=True)
class CrossFixedPoint:
    """A fixed point of :func:`cross_fixed_point`.

    Attributes
    ----------
    alpha : float
    mmse, q : tuples, one entry per layer
        The layers' errors and overlaps.
    e_12 : float
        The residual cross-covariance (the centred estimates' cross overlap ``q_12``).
    deltas, kappa : tuple, float
        The layers' noises and the correlation of layers 1 and 2's at the fixed point.
    mixing, mixing_se : (L, L) arrays
        ``F^{-1} Gamma`` at the fixed point (its entries ``a_12``, ``a_21``) and its errors.
    memory : (L, L) array or None
        ``I + F^{-1} Lambda`` at the fixed point, where the channel side computed it.
    iterations : int
        Iterations to convergence, not counting the ``further`` check.
    trace : (iterations + 1, L + 1) array
        ``(mmse_1, ..., mmse_L, e_12)`` at every iterate.
    """

    alpha: float
    mmse: tuple
    q: tuple
    e_12: float
    deltas: tuple
    kappa: float
    mixing: np.ndarray
    mixing_se: np.ndarray
    memory: np.ndarray | None
    iterations: int
    trace: np.ndarray


def monte_carlo_side(channel, shared, *, n: int = 200_000, seed=0, batches: int = 10, memory: bool = False):
    """The channel side by :func:`~aimlib.channels.deep_moments.response_moments` with ``n`` draws
    of the stream ``seed``, the same at every call (common random numbers); a function
    ``(q, Q0, e_12) -> ChannelSide``.  ``memory``: whether to compute the memory too (twelve more
    calls of ``g_out``; :func:`measured_prior` needs it)."""
    n = v.integer("n", n, minimum=100 * batches)
    seed = v.integer("seed", seed, minimum=0)

    def side(q, Q0, e_12):
        m = response_moments(channel, q, Q0, shared=shared, cross=e_12, n=n, batches=batches, seed=seed,
                             memory=memory)
        return ChannelSide(m.F, m.mixing, m.se["mixing"], m.memory)
    return side


def separable_side(channel, shared, T: int = 2):
    """The channel side with the cross overlap and the mixing left out: the tabulated moment matrix
    of :meth:`~aimlib.channels.DeepAttention.moment_matrix` at ``e_12 = 0`` and the mixing ``I``
    (the Nishimori identities); with it :func:`cross_fixed_point` is the separable state evolution
    and its ``e_12`` the first order of :func:`~aimlib.state_evolution.cross_overlap`."""
    def side(q, Q0, e_12):
        F = np.asarray(channel.moment_matrix(tuple(q), tuple(Q0), T, shared), dtype=float)
        return ChannelSide(F, np.eye(len(F)), np.zeros(F.shape))
    return side


def first_order_prior(priors, diagonal: bool = False):
    r"""The prior side to first order (module docstring, step 2): a function
    ``(deltas, kappa, at) -> (mmse_1, mmse_2, e_12)``, ``at`` the :class:`ChannelSide`.

    With ``diagonal`` the mixing's diagonal is fed back too: ``R_l = A_ll S_l + sqrt(Delta_l) Z_l`` holds what
    the noise ``Delta_l / A_ll^2`` holds, and an RIE tuned to ``Delta_l`` is ``O(A_ll - 1)`` from that posterior
    mean, so its error is ``mmse_l(Delta_l / A_ll^2)`` up to ``O((A_ll - 1)^2)`` (book, chapter "Correlated
    layers", section "The prior side to all orders"); ``e_12`` is then the first order at those errors.
    """
    def prior(deltas, kappa, at: ChannelSide):
        scale = np.diag(at.mixing)[:len(deltas)] if diagonal else np.ones(len(deltas))
        if np.any(scale <= 0):
            raise ValueError(f"the mixing's diagonal must be positive to be fed back, got {scale}")
        mmse = [p.mmse(x / a ** 2) for p, x, a in zip(priors, deltas, scale)]
        return np.array([*mmse, cross_residual(mmse, deltas, kappa, (at.mixing[0, 1], at.mixing[1, 0]))])
    return prior


def _instances(seeds) -> list:
    """``seeds`` as a list of at least two ints ``>= 0`` (the instances of :func:`measured_shifts`)."""
    seeds = [v.integer("seeds", s, minimum=0) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"seeds must hold at least two instances, got {len(seeds)}")
    return seeds


def measured_shifts(priors, deltas, kappa, mixing, memory, d: int, seeds) -> tuple:
    r"""What ``kappa``, the mixing ``A`` and the memory ``B`` do to two RIEs, measured: ``(mean, se)``, each
    ``(shift of mmse_1, shift of mmse_2, e_12)``.

    Per seed, :func:`~aimlib.priors.correlated.measure_cross_residual` of the inputs
    ``R_l = sum_k A_lk S_k + B_lk S0_k + sqrt(Delta_l) Z_l`` minus the same instance (teachers, noises)
    at ``kappa = 0``, ``A = I``, ``B = 0``: the instance's own scatter, and most of its ``O(1/d)`` error,
    cancel in the difference.  ``se`` is the standard error over ``seeds`` (at least two).
    """
    rows = []
    for s in _instances(seeds):
        full = measure_cross_residual(priors, deltas, kappa, d, s, mixing=mixing, memory=memory)
        plain = measure_cross_residual(priors, deltas, 0.0, d, s)
        rows.append([*np.subtract(full["mmse"], plain["mmse"]), full["e_12"] - plain["e_12"]])
    rows = np.array(rows)
    return rows.mean(axis=0), rows.std(axis=0, ddof=1) / np.sqrt(len(rows))


def measured_prior(priors, d: int = 600, seeds=range(8)):
    r"""The prior side to all orders in ``(kappa, A, B)``, with the diagonals of the mixing and the memory:
    ``mmse_l = mmse_{S_l}(Delta_l)`` plus the measured shift, ``e_12`` measured (:func:`measured_shifts`,
    the same instances at every call, so that the map is one function of the state).  The channel side
    must carry the memory (``monte_carlo_side(memory=True)``).  What it keeps of the finite size ``d`` is
    an error of order ``1/d`` in the shifts; the book measures them at two sizes to bound it."""
    d, seeds = v.integer("d", d, minimum=2), _instances(seeds)

    def prior(deltas, kappa, at: ChannelSide):
        if at.memory is None:
            raise ValueError("the measured prior side needs the memory I + F^{-1} Lambda: build the channel "
                             "side with monte_carlo_side(..., memory=True)")
        shift, _ = measured_shifts(priors, deltas, kappa, at.mixing, at.memory, d, seeds)
        return np.array([p.mmse(x) for p, x in zip(priors, deltas)] + [0.0]) + shift
    return prior


def _pair(at: ChannelSide) -> ChannelSide:
    """Layers 1 and 2's blocks of ``at``: all of it for two layers; for three, the block that the layer-3 flip
    leaves coupled (``F``, ``Gamma`` and ``Lambda`` vanish between layer 3 and the others)."""
    block = (slice(0, 2),) * 2
    return ChannelSide(at.F[block], at.mixing[block], at.mixing_se[block],
                       None if at.memory is None else at.memory[block])


def _prior_side(alpha, prior, priors, at: ChannelSide):
    """``(mmse_1, ..., mmse_L, e_12)`` from the channel side's noises, mixing and memory (module docstring,
    step 2); a third layer sees its own noise ``1/(alpha F_33)`` and no cross term."""
    pair = _pair(at)
    d1, d2, kappa = layer_noises(pair.F, alpha)
    x = prior((d1, d2), kappa, pair)
    third = [p.mmse(1.0 / (alpha * at.F[l, l])) for l, p in enumerate(priors[2:], start=2)]
    return np.array([*x[:2], *third, x[2]])


def _start(channel, priors, init) -> tuple:
    """``(L, Q0, shared, x0)``: the layers, the priors' second moments and known parts, and ``init`` checked."""
    L = channel.n_indices if isinstance(channel, Channel) else None
    if L not in (2, 3) or len(priors) != L:
        raise ValueError(f"cross_fixed_point: two or three layers with one prior each, got {channel!r} and "
                         f"{len(priors)} priors")
    Q0, V0 = components(priors)
    shared = tuple(p.mean_square() for p in priors)
    if L == 3 and any(shared):
        raise ValueError(f"cross_fixed_point: three layers need centred teachers (mean_square 0), got {shared}")
    if len(init) != L + 1:
        raise ValueError(f"init must hold {L + 1} numbers (mmse_1, ..., mmse_{L}, e_12), got {len(init)}")
    x0 = np.array([v.in_range(f"init[{i}]", x, 0.0, V0[i]) for i, x in enumerate(init[:L])]
                  + [v.real(f"init[{L}]", init[L])])
    return L, Q0, shared, x0


def three_layers(tol: float) -> dict:
    """How three layers are iterated (``scripts/deep_cross_se.py --layers 3``, ``se --layers 3 --cross iterated``):
    the keyword arguments of :func:`cross_fixed_point`, with ``2.5 tol``, ``tol`` the tolerance two layers take at
    the same draws.  Undamped, ended by the window rule (at alpha = 2 the map contracts slowly, and a damped step
    of 5e-5 left it 5e-4 short of its fixed point, which five further iterations did not see), and checked over
    twenty further iterations."""
    return dict(tol=2.5 * v.positive("tol", tol), damping=0.0, further=20, max_iter=150, rule="window")


def cross_fixed_point(alpha: float, channel, priors, init, *, side=None, prior=None, damping: float = 0.3,
                      tol: float = 1e-4, max_iter: int = 60, further: int = 5, rule: str = "step") -> CrossFixedPoint:
    r"""Iterate ``(mmse_1, ..., mmse_L, e_12)`` to a fixed point of the state evolution with the cross overlap.

    Parameters
    ----------
    alpha : float
        Sample complexity, ``> 0``.
    channel : DeepAttention
        Two layers, or three with centred teachers (``T = 2``).
    priors : sequence of Priors
        The teachers' priors, one per layer; their ``mean_square`` is the known part the estimates share.
    init : sequence
        The starting ``(mmse_1, ..., mmse_L, e_12)``, each error at most the prior's before any data,
        e.g. the separable fixed point and its first-order :func:`~aimlib.state_evolution.cross_overlap`.
    side : callable, optional
        ``(q, Q0, e_12) -> ChannelSide``; default :func:`monte_carlo_side` with its defaults.
    prior : callable, optional
        Layers 1 and 2's prior side, ``(deltas, kappa, ChannelSide) -> (mmse_1, mmse_2, e_12)``; default
        :func:`first_order_prior` (:func:`measured_prior`: to all orders).  A third layer's error is
        ``mmse_3(1/(alpha F_33))``, its diagonal of the mixing kept at one (and reported).
    damping : float
        Weight of the old iterate, in ``[0, 0.999]``.
    tol : float
        How far the ``further`` iterates may move from the declared point; set it above the map's Monte
        Carlo graininess, which common random numbers leave as steps of order ``1/n``.
    max_iter, further : int
        Iterations allowed, and iterations taken on after convergence as its check.
    rule : {'step', 'window'}
        What ends the iteration: a step of ``tol/4`` (``'step'``, the rule the two-layer data were made
        with, checked by the ``further`` iterates), or the distance to the fixed point,
        estimated from the contraction over a window of ten steps, within ``tol/4`` (``'window'``,
        :class:`~aimlib.iteration.WindowRule`: it does not stop on a slow mode).

    Returns
    -------
    CrossFixedPoint

    Raises
    ------
    ConvergenceError
        No convergence within ``max_iter``, or a further iterate more than ``tol`` away.
    ValueError
        Bad input; a singular moment matrix (``kappa = +-1``, from
        :func:`~aimlib.priors.correlated.layer_noises`).
    """
    alpha = v.positive("alpha", alpha)
    L, Q0, shared, x0 = _start(channel, priors, init)
    side = monte_carlo_side(channel, shared) if side is None else side
    prior = first_order_prior(priors) if prior is None else prior
    further = v.integer("further", further, minimum=1)
    last = {}

    def at(x):
        """The channel side at ``x``; the last one is kept, so the further check starts from it."""
        key = tuple(x)
        if key not in last:
            last.clear()
            last[key] = side(tuple(Q0 - x[:L]), tuple(Q0), float(x[L]))
        return last[key]

    def step(x):
        return _prior_side(alpha, prior, priors, at(x))

    run = iterate_map(step, x0, v.positive("tol", tol) / 4, rule=rule, damping=damping, max_iter=max_iter)
    if not run.verdict.converged:
        raise ConvergenceError(f"the cross state evolution at alpha={alpha:g} did not converge within "
                               f"max_iter={max_iter} ({run.verdict.state}, {rule} rule's distance "
                               f"{run.verdict.distance:.3g} > tol/4={tol / 4:g}); raise max_iter or damping")
    final = at(run.x)
    taken_further(lambda x: damping * x + (1 - damping) * step(x), run.x, further, tol,
                  f"the cross state evolution at alpha={alpha:g}")
    d1, d2, kappa = layer_noises(_pair(final).F, alpha)
    deltas = (d1, d2, *(1.0 / (alpha * final.F[l, l]) for l in range(2, L)))
    return CrossFixedPoint(alpha=alpha, mmse=tuple(map(float, run.x[:L])), q=tuple(map(float, Q0 - run.x[:L])),
                           e_12=float(run.x[L]), deltas=deltas, kappa=kappa, mixing=final.mixing,
                           mixing_se=final.mixing_se, memory=final.memory, iterations=run.iterations,
                           trace=run.trace)
