r"""State evolution by iteration: one overlap per index matrix.

For a channel that reads ``L`` index matrices with independent priors of
width ratios ``rho_l`` (book, chapter "The replica computation"),

.. math::  \hat q_l = \alpha F_l(q_1, \dots, q_L), \qquad q_l = Q_{0,l} - \mathrm{mmse}_S(1/\hat q_l; \rho_l),

with ``Q0_l = 1 + rho_l`` and ``F_l`` the channel's :meth:`~aimlib.channels.base.Channel.fisher`.
The state is ``V_l = Q0_l - q_l``, the estimation error of layer ``l``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as v
from ..channels import make_channel
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached
from ..model import widths
from .prior import prior_mmse

__all__ = ["SEResult", "fixed_point"]


@dataclass(frozen=True)
class SEResult:
    """A state-evolution fixed point.

    Attributes
    ----------
    alpha : float
        Sample complexity ``n / d^2``.
    mmse : float or tuple
        Estimation error ``E_S = Q0 - q = V`` (one per index matrix when ``L > 1``).
    q, qhat : float or tuple
        Overlap and its conjugate (``qhat = inf`` at perfect recovery).
    iterations : int
        SE iterations, or prior-MMSE evaluations of the closed-form root find.
    trace : numpy.ndarray
        The successive values of ``V`` visited (shape ``(iterations + 1, L)`` when ``L > 1``).
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
    """The channel's ``F_l`` as an array of ``L`` values."""
    if ch.n_indices == 1:
        return np.array([ch.fisher(q[0], Q0[0], T)])
    return np.asarray(ch.fisher(tuple(q), tuple(Q0), T), dtype=float)


def _fisher_at(ch, V, Q0, T, alpha, rhos) -> np.ndarray:
    """:func:`_fisher` at the errors ``V``; where it fails because ``V`` fell below the float64
    resolution of ``Q0`` (``q = Q0 - V`` rounds to ``Q0``), the error names ``alpha``."""
    try:
        return _fisher(ch, Q0 - V, Q0, T)
    except ValueError:
        if not np.any(Q0 - V >= Q0):
            raise
        raise ValueError(f"alpha = {alpha:g} is beyond the reach of the {ch.name} state evolution at rho = "
                         f"{_pack(np.asarray(rhos), len(rhos))}: the error falls below the float64 resolution "
                         f"of 1 + rho (it is 0 to machine precision); use a smaller alpha") from None


def _conjugate(alpha, F):
    """``qhat = alpha F`` with ``0 * inf = 0`` (no data carries no information)."""
    return np.array([alpha * f if (f != math.inf or alpha > 0) else 0.0 for f in F])


def _pack(x, L):
    return float(x[0]) if L == 1 else tuple(float(a) for a in x)


def fixed_point(alpha: float, channel="softmax", *, T: int = 2, rho=0.5, beta: float | None = None,
                noise: float | None = None, damping: float = 0.0, tol: float = 1e-10,
                max_iter: int = 10_000, init=None, mmse=None, on_max_iter: str = "raise") -> SEResult:
    r"""Iterate ``qhat_l = alpha F_l(q)``, ``q_l = Q0_l - mmse_S(1/qhat_l; rho_l)`` to a fixed point.

    One step is ``V <- (1 - damping) mmse_S(1/(alpha F(Q0 - V))) + damping V``
    (componentwise); it stops when ``max_l |V_{t+1} - V_t| < tol``.

    Parameters
    ----------
    alpha : float
        Sample complexity ``>= 0``.
    channel : str or Channel
        ``'softmax'``, ``'linear'``, ``'hardmax'`` or an instance (``L`` indices).
    T : int
        Sequence length, ``>= 2``.
    rho : float, or sequence of ``L`` floats
        Width ratios of the teachers (finite, in ``RHO_RANGE``).
    beta, noise : float or None
        Channel parameters when ``channel`` is a name.
    damping : float in [0, 1)
    tol : float
    max_iter : int
    init : float, sequence or None
        Initial ``V``; default ``1`` (``q = rho``: the uninformative estimate ``E[S] = sqrt(rho) I``).
    mmse : callable or None
        ``mmse(delta, rho)``; default :func:`aimlib.rmt.mmse`.
    on_max_iter : {'raise', 'warn'}
        The rule of :mod:`aimlib.errors` at the iteration cap.
    """
    alpha = v.nonnegative("alpha", alpha)
    T = v.integer("T", T, minimum=2)
    ch = make_channel(channel, beta=beta, noise=noise)
    rhos = widths(ch, rho)
    L = len(rhos)
    damping = v.in_range("damping", damping, 0.0, 0.999)
    tol = v.positive("tol", tol)
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    check_on_max_iter(on_max_iter)
    Q0 = np.array([1.0 + r for r in rhos])
    V = np.ones(L) if init is None else np.array(
        [v.in_range("init", x, 0.0, Q0[i]) for i, x in enumerate(np.broadcast_to(init, (L,)))])
    ms = [prior_mmse(r, mmse) for r in rhos]
    trace = [V]
    for it in range(1, max_iter + 1):
        qhat = _conjugate(alpha, _fisher_at(ch, V, Q0, T, alpha, rhos))
        V_new = np.array([m(1.0 / qh) if qh > 0 else 1.0 for m, qh in zip(ms, qhat)])
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
    qhat = _conjugate(alpha, _fisher_at(ch, V, Q0, T, alpha, rhos))
    tr = np.asarray(trace)
    return SEResult(alpha=alpha, mmse=_pack(V, L), q=_pack(Q0 - V, L), qhat=_pack(qhat, L),
                    iterations=it, trace=tr[:, 0] if L == 1 else tr, method="iterate",
                    converged=change < tol)
