r"""State evolution by iteration: one overlap per index matrix.

For a channel that reads ``L`` index matrices with independent priors
(book, chapter "The replica computation"),

.. math::  \hat q_c = \alpha F_c(q), \qquad q_c = Q_{0,c} - \mathrm{mmse}_c(1/\hat q),

one component ``c`` per sector of every layer's prior (:mod:`aimlib.priors`: one
for a symmetric ``S``; the symmetric and antisymmetric parts of a square one),
``Q0_c`` the prior's :meth:`~aimlib.priors.base.Prior.sector_moments`,
``mmse_c`` its :meth:`~aimlib.priors.base.Prior.sector_mmse` and ``F_c`` the
channel's :meth:`~aimlib.channels.base.Channel.fisher`.  The state is ``V_c =
Q0_c - q_c``, the estimation error of component ``c``.  ``qhat_c = alpha F_c`` is the one
conjugate of the library, tied and untied: ``1/qhat_c`` is the noise of component ``c`` in the
prior's units (:meth:`~aimlib.channels.base.Channel.sector_noises`; the module
:mod:`aimlib.channels.base` derives it, and the factor 2 of the book's untied conjugate).

A channel whose output mixes its layers (``joint_output``) with teachers that share a
known part (priors of non-zero mean, e.g. Wishart) has correlated estimates and a
cross term, and three hardmax layers have one for every prior (:func:`cross_terms`);
there one overlap per layer is not the Bayes state evolution.  What
:func:`fixed_point` iterates then is GAMP-RIE's with one denoiser per layer
(:meth:`~aimlib.channels.DeepAttention.separable_fisher`; it leaves out the cross overlap
that the layers' correlated noises create, :mod:`~aimlib.state_evolution.cross`, so it is not
established as a bound on the Bayes error), and :func:`oracle_fixed_point` gives the lower bound
of the oracle that knows the other layers (book, chapter "Deep attention").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as v
from ..channels import make_channel
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached
from ..iteration import iterate_map
from ..priors import make_priors

__all__ = ["SEResult", "fixed_point", "oracle_fixed_point", "components", "prior_side", "check_joint_law",
           "shares_known_part", "cross_terms", "PREDICTIONS"]

#: what a fixed point predicts (:attr:`SEResult.prediction`)
PREDICTIONS = {"bayes": "the Bayes-optimal error (replica-symmetric)",
               "separable-gamp": ("the separable state evolution of GAMP-RIE with one denoiser per layer (its cross "
                                  "overlap left out; not established as a bound on the Bayes error)"),
               "oracle": "the error of the oracle given the other layers, a lower bound on the Bayes error"}


@dataclass(frozen=True)
class SEResult:
    """A state-evolution fixed point.

    Attributes
    ----------
    alpha : float
        Sample complexity ``n / d^2``.
    mmse : float or tuple
        Estimation error ``E_S = Q0 - q = V`` (one per component when there are several).
    q, qhat : float or tuple
        Overlap and its conjugate (``qhat = inf`` at perfect recovery).
    iterations : int
        SE iterations, or prior-MMSE evaluations of the closed-form root find.
    trace : numpy.ndarray
        The successive values of ``V`` visited (shape ``(iterations + 1, C)`` for ``C > 1`` components).
    method : str
        ``'closed'`` or ``'iterate'``.
    converged : bool
        False only for a run stopped at ``max_iter`` with ``on_max_iter='warn'``.
    prediction : str
        What the fixed point predicts, a key of :data:`PREDICTIONS`.
    """

    alpha: float
    mmse: float | tuple
    q: float | tuple
    qhat: float | tuple
    iterations: int
    trace: np.ndarray = field(repr=False)
    method: str = "iterate"
    converged: bool = True
    prediction: str = "bayes"

    @property
    def V(self):
        """Fluctuation variance ``V = Q0 - q`` (equal to ``mmse``)."""
        return self.mmse


def _law(ch, priors, T):
    """``(F, prediction)``: the map ``q -> F_c(q)`` the state evolution iterates, and what it predicts.

    The channel's :meth:`~aimlib.channels.base.Channel.fisher` (the Bayes state evolution), or
    where the output has :func:`cross_terms` for these priors (teachers that
    :func:`shares_known_part`, or three hardmax layers) the channel's ``separable_fisher``
    (GAMP-RIE with one denoiser per layer).
    """
    if cross_terms(ch, priors):
        shared = tuple(p.mean_square() for p in priors)
        return (lambda q, Q0: np.asarray(ch.separable_fisher(tuple(q), tuple(Q0), T, shared))), "separable-gamp"
    if len(priors) == 1 and len(priors[0].sectors) == 1:
        return (lambda q, Q0: np.array([ch.fisher(q[0], Q0[0], T)])), "bayes"
    return (lambda q, Q0: np.asarray(ch.fisher(tuple(q), tuple(Q0), T), dtype=float)), "bayes"


def shares_known_part(ch, priors) -> bool:
    """Whether the layers' estimates are correlated: a ``joint_output`` channel and a prior of non-zero mean.

    Such teachers share a known part: ``S_l = E S_l + F_l`` gives every layer the index of
    ``E S_l`` (for Wishart teachers ``sqrt(rho_l) h(I)``, the same token Gram matrix), so the
    layers' estimates are correlated and the output has a cross term between the layers
    (book, chapter "Deep attention").  Centred teachers (:class:`aimlib.priors.Centred`) have none.
    """
    return bool(ch.joint_output and any(p.mean_square() > 0 for p in priors))


def cross_terms(ch, priors) -> bool:
    """Whether the output has cross terms between the layers for ``priors``, so that one overlap per
    layer is not the Bayes state evolution: teachers that :func:`shares_known_part`, or a channel
    whose ``correlated_layers(priors)`` says so (three hardmax layers, for every prior)."""
    return shares_known_part(ch, priors) or ch.correlated_layers(priors)


def check_joint_law(ch, priors) -> None:
    """Refuse priors for which the output has :func:`cross_terms`: the Bayes free entropy of such a
    model needs a cross overlap between the layers, which one overlap per layer does not carry."""
    if shares_known_part(ch, priors):
        raise ValueError(f"the {ch.name} free entropy needs teachers of zero mean (centred: "
                         f"aimlib.priors.Centred, --teachers centred), got {', '.join(map(repr, priors))}: "
                         "the layers of Wishart teachers share the index of sqrt(rho) I, and their Bayes "
                         "state evolution needs a cross overlap that one overlap per layer does not carry")
    if cross_terms(ch, priors):
        raise ValueError(f"the free entropy of {ch!r} is not available: its output has a cross term between "
                         f"layers for the priors {', '.join(map(repr, priors))}, and its Bayes state "
                         "evolution needs a cross overlap that one overlap per layer does not carry")


def components(priors) -> tuple:
    """``(Q0, V_0)``: the sector moments of all layers' priors and their errors before any data."""
    Q0 = np.array([m for p in priors for m in p.sector_moments()])
    V0 = np.array([x for p in priors for x in p.sector_mmse((np.inf,) * len(p.sectors))])
    return Q0, V0


def prior_side(priors, qhat) -> np.ndarray:
    """``V_c = mmse_c(1/qhat)``: each layer's :meth:`~aimlib.priors.base.Prior.sector_mmse` on its components."""
    out, i = [], 0
    for p in priors:
        k = len(p.sectors)
        out += p.sector_mmse(tuple(1.0 / qh if qh > 0 else np.inf for qh in qhat[i:i + k]))
        i += k
    return np.array(out, dtype=float)


def _fisher_at(fisher, V, Q0, alpha, ch, priors) -> np.ndarray:
    """``fisher`` at the errors ``V``; where it fails because ``V`` fell below the float64
    resolution of ``Q0`` (``q = Q0 - V`` rounds to ``Q0``), the error names ``alpha``."""
    try:
        return fisher(Q0 - V, Q0)
    except ValueError:
        if not np.any(Q0 - V >= Q0):
            raise
        raise ValueError(f"alpha = {alpha:g} is beyond the reach of the {ch.name} state evolution with the "
                         f"prior(s) {', '.join(map(repr, priors))}: the error falls below the float64 resolution "
                         f"of the prior's second moment (it is 0 to machine precision); use a smaller alpha") from None


def _conjugate(alpha, F):
    """``qhat = alpha F`` with ``0 * inf = 0`` (no data carries no information)."""
    return np.array([alpha * f if (f != math.inf or alpha > 0) else 0.0 for f in F])


def _pack(x, L):
    return float(x[0]) if L == 1 else tuple(float(a) for a in x)


def fixed_point(alpha: float, channel="softmax", *, T: int = 2, rho=0.5, beta: float | None = None,
                noise: float | None = None, damping: float = 0.0, tol: float = 1e-10,
                max_iter: int = 10_000, init=None, on_max_iter: str = "raise", stop: str = "step") -> SEResult:
    r"""Iterate ``qhat_c = alpha F_c(q)``, ``q_c = Q0_c - mmse_c(1/qhat)`` to a fixed point.

    One step is ``V <- (1 - damping) mmse(1/(alpha F(Q0 - V))) + damping V``
    (componentwise, :func:`aimlib.iteration.iterate_map`); with ``stop='step'`` it stops when
    ``max_c |V_{t+1} - V_t| < tol``, with ``stop='window'`` when the distance to the fixed point,
    estimated from the contraction over a window of steps, is (:class:`aimlib.iteration.WindowRule`).

    Parameters
    ----------
    alpha : float
        Sample complexity ``>= 0``.
    channel : str or Channel
        ``'softmax'``, ``'linear'``, ``'hardmax'`` or an instance (``L`` indices).
    T : int
        Sequence length, ``>= 2``.
    rho : float, Prior, or a sequence of ``L`` of them
        The teachers' priors, or their width ratios (:func:`aimlib.priors.make_prior`:
        the Wishart prior, ``inf`` the Gaussian one).
    beta, noise : float or None
        Channel parameters when ``channel`` is a name.
    damping : float in [0, 1)
    tol : float
    max_iter : int
    init : float, sequence or None
        Initial ``V``; default the error of the uninformative estimate ``E[S]`` (``1`` for
        the Wishart prior: ``q = rho``).
    on_max_iter : {'raise', 'warn'}
        The rule of :mod:`aimlib.errors` at the iteration cap (and on a cycle, ``stop='window'``).
    stop : {'step', 'window'}
        The stopping rule.
    """
    alpha = v.nonnegative("alpha", alpha)
    T = v.integer("T", T, minimum=2)
    ch = make_channel(channel, beta=beta, noise=noise)
    priors = make_priors(ch, rho)
    fisher, prediction = _law(ch, priors, T)
    return _iterate(alpha, fisher, ch, priors, prediction, damping=damping, tol=tol, max_iter=max_iter,
                    init=init, on_max_iter=on_max_iter, stop=stop)


def _iterate(alpha, fisher, ch, priors, prediction, *, damping, tol, max_iter, init, on_max_iter,
             stop="step") -> SEResult:
    """The iteration of :func:`fixed_point` with the map ``q -> F(q)`` given (:func:`aimlib.iteration.iterate_map`)."""
    Q0, V0 = components(priors)
    L = len(Q0)
    tol = v.positive("tol", tol)
    check_on_max_iter(on_max_iter)
    V = V0 if init is None else np.array(
        [v.in_range("init", x, 0.0, Q0[i]) for i, x in enumerate(np.broadcast_to(init, (L,)))])

    def step(V):
        return prior_side(priors, _conjugate(alpha, _fisher_at(fisher, V, Q0, alpha, ch, priors)))

    run = iterate_map(step, V, tol, rule=stop, damping=damping, max_iter=max_iter)
    V, it, verdict = run.x, run.iterations, run.verdict
    if verdict.state == "diverged":
        raise ConvergenceError(f"SE diverged at alpha={alpha:g} (V={V.tolist()}) after {it} iterations")
    if not verdict.converged:
        what = (f"is oscillating with period {verdict.period} (amplitude {verdict.amplitude:.3g})"
                if verdict.state == "oscillating" else
                f"did not converge within max_iter={max_iter} iterations (last "
                f"{'change' if stop == 'step' else 'distance'} {verdict.distance:.3g} > tol={tol:g})")
        max_iter_reached(f"SE {what} at alpha={alpha:g}; increase max_iter or damping", on_max_iter)
    qhat = _conjugate(alpha, _fisher_at(fisher, V, Q0, alpha, ch, priors))
    tr = run.trace
    return SEResult(alpha=alpha, mmse=_pack(V, L), q=_pack(Q0 - V, L), qhat=_pack(qhat, L),
                    iterations=it, trace=tr[:, 0] if L == 1 else tr, method="iterate",
                    converged=verdict.converged, prediction=prediction)


def oracle_fixed_point(alpha: float, channel, layer: int, *, T: int = 2, rho=0.5, tol: float = 1e-10,
                       max_iter: int = 10_000, on_max_iter: str = "raise") -> SEResult:
    r"""The state evolution of layer ``layer`` for the oracle that knows the other layer's teacher.

    ``qhat = alpha F^orc(q)``, ``q = Q0 - mmse(1/qhat)`` with the channel's ``oracle_fisher``
    (the other layer's index known exactly; :meth:`~aimlib.channels.DeepAttention.oracle_fisher`).
    The oracle has more information, so its error is a lower bound on the layer's Bayes
    error: a replica-symmetric prediction for a one-index model with side information.

    Parameters
    ----------
    alpha : float
        Sample complexity, ``>= 0``.
    channel : DeepAttention
        Two hardmax layers at ``T = 2`` (a name is passed to :func:`aimlib.channels.make_channel`).
    layer : {1, 2}
        The layer whose error is predicted.
    T : int
        Tokens per sequence (``2``).
    rho : sequence of two floats or Priors
        Both layers' priors (or width ratios), as for :func:`fixed_point`.
    tol, max_iter, on_max_iter
        As for :func:`fixed_point`.

    Returns
    -------
    SEResult
        The layer's fixed point, ``prediction='oracle'``.
    """
    alpha = v.nonnegative("alpha", alpha)
    T = v.integer("T", T, minimum=2)
    ch = make_channel(channel)
    if not ch.has_oracle:
        raise ValueError(f"channel must have several layers and an oracle side (DeepAttention), got {ch!r}")
    priors = make_priors(ch, rho)
    layer = v.choice("layer", layer, set(range(1, len(priors) + 1)))
    Q0 = tuple(p.second_moment() for p in priors)
    shared = tuple(p.mean_square() for p in priors)

    def fisher(q, _):
        return np.array([ch.oracle_fisher(layer, float(q[0]), Q0, T, shared)])
    return _iterate(alpha, fisher, ch, (priors[layer - 1],), "oracle", damping=0.0, tol=tol,
                    max_iter=max_iter, init=None, on_max_iter=on_max_iter)
