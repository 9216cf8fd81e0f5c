r"""State evolution by iteration: one overlap per index matrix.

For a channel that reads ``L`` index matrices with independent priors
(book, chapter "The replica computation"),

.. math::  \hat q_c = \alpha F_c(q), \qquad q_c = Q_{0,c} - \mathrm{mmse}_c(1/\hat q),

one component ``c`` per sector of every layer's prior (:mod:`aimlib.priors`: one
for a symmetric ``S``; the symmetric and antisymmetric parts of a square one),
``Q0_c`` the prior's :meth:`~aimlib.priors.base.Prior.sector_moments`,
``mmse_c`` its :meth:`~aimlib.priors.base.Prior.sector_mmse` and ``F_c`` the
channel's :meth:`~aimlib.channels.base.Channel.fisher`.  The state is ``V_c =
Q0_c - q_c``, the estimation error of component ``c``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as v
from ..channels import make_channel
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached
from ..priors import make_priors

__all__ = ["SEResult", "fixed_point", "components", "prior_side", "check_joint_law"]


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
    """

    alpha: float
    mmse: float | tuple
    q: float | tuple
    qhat: float | tuple
    iterations: int
    trace: np.ndarray = field(repr=False)
    method: str = "iterate"
    converged: bool = True

    @property
    def V(self):
        """Fluctuation variance ``V = Q0 - q`` (equal to ``mmse``)."""
        return self.mmse


def _fisher(ch, q, Q0, T) -> np.ndarray:
    """The channel's ``F_c`` as an array of one value per component."""
    if len(q) == 1:
        return np.array([ch.fisher(q[0], Q0[0], T)])
    return np.asarray(ch.fisher(tuple(q), tuple(Q0), T), dtype=float)


def check_joint_law(ch, priors) -> None:
    """Refuse priors with a non-zero mean for a channel whose output mixes its layers (``joint_output``).

    Such teachers share a known part: ``S_l = E S_l + F_l`` gives every layer the index of
    ``E S_l`` (for Wishart teachers ``sqrt(rho_l) h(I)``, the same token Gram matrix), so the
    layers' estimates are correlated, while the channel's ``fisher`` draws them independently
    (book, chapter "Deep attention").  Centred teachers (:class:`aimlib.priors.Centred`) are exact.
    """
    if ch.joint_output and any(p.mean_square() > 0 for p in priors):
        raise ValueError(f"the {ch.name} state evolution needs teachers of zero mean (centred: "
                         f"aimlib.priors.Centred, --teachers centred), got {', '.join(map(repr, priors))}: "
                         "the layers of Wishart teachers share the index of sqrt(rho) I, which its "
                         "one-overlap-per-layer state evolution does not carry")


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


def _fisher_at(ch, V, Q0, T, alpha, priors) -> np.ndarray:
    """:func:`_fisher` at the errors ``V``; where it fails because ``V`` fell below the float64
    resolution of ``Q0`` (``q = Q0 - V`` rounds to ``Q0``), the error names ``alpha``."""
    try:
        return _fisher(ch, Q0 - V, Q0, T)
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
                max_iter: int = 10_000, init=None, on_max_iter: str = "raise") -> SEResult:
    r"""Iterate ``qhat_c = alpha F_c(q)``, ``q_c = Q0_c - mmse_c(1/qhat)`` to a fixed point.

    One step is ``V <- (1 - damping) mmse(1/(alpha F(Q0 - V))) + damping V``
    (componentwise); it stops when ``max_c |V_{t+1} - V_t| < tol``.

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
        The rule of :mod:`aimlib.errors` at the iteration cap.
    """
    alpha = v.nonnegative("alpha", alpha)
    T = v.integer("T", T, minimum=2)
    ch = make_channel(channel, beta=beta, noise=noise)
    priors = make_priors(ch, rho)
    check_joint_law(ch, priors)
    Q0, V0 = components(priors)
    L = len(Q0)
    damping = v.in_range("damping", damping, 0.0, 0.999)
    tol = v.positive("tol", tol)
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    check_on_max_iter(on_max_iter)
    V = V0 if init is None else np.array(
        [v.in_range("init", x, 0.0, Q0[i]) for i, x in enumerate(np.broadcast_to(init, (L,)))])
    trace = [V]
    for it in range(1, max_iter + 1):
        qhat = _conjugate(alpha, _fisher_at(ch, V, Q0, T, alpha, priors))
        V_new = prior_side(priors, qhat)
        V_new = (1 - damping) * V_new + damping * V
        trace.append(V_new)
        if not np.all(np.isfinite(V_new)):
            raise ConvergenceError(f"SE diverged at alpha={alpha:g} (V={V_new.tolist()}) after {it} iterations")
        change = float(np.max(np.abs(V_new - V)))
        V = V_new
        if change < tol:
            break
    else:
        max_iter_reached(f"SE did not converge at alpha={alpha:g} within max_iter={max_iter} "
                         f"iterations (last change {change:.3g} > tol={tol:g}); increase max_iter or "
                         "damping", on_max_iter)
    qhat = _conjugate(alpha, _fisher_at(ch, V, Q0, T, alpha, priors))
    tr = np.asarray(trace)
    return SEResult(alpha=alpha, mmse=_pack(V, L), q=_pack(Q0 - V, L), qhat=_pack(qhat, L),
                    iterations=it, trace=tr[:, 0] if L == 1 else tr, method="iterate",
                    converged=change < tol)
