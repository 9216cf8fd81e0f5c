r"""GAMP-RIE's Onsager matrix against the leave-one-out estimates it stands for.

The Onsager term of the channel step removes from ``omega^mu_l = h^mu(S_hat_l)`` the part of
sample ``mu``'s own output that reached the estimate through the backward pass.  Leave
sample ``mu`` out of the last channel step and denoise again: the estimates
``S_hat_l^{(-mu)}`` do not depend on it, and

.. math::

    h^\mu\big(\hat S^{(-\mu)}_l\big) \approx h^\mu(\hat S_l) - \Sigma \odot \sum_{l'} O_{ll'}\, g^\mu_{l'}

up to ``O(d^{-1/2})`` per entry, with ``O`` the Onsager matrix of
:func:`aimlib.amp.steps.onsager_rows`.  That is the last step's part of sample ``mu``'s influence.
Sample ``mu`` also reached the estimate through the steps before: through the damping, and through
``R_l = S_hat_l + ...``, which keeps ``(I + F_hat^{-1} Lambda) S_hat`` of the last estimate where the
outputs leave the Nishimori identity (book chapter "Three layers").  :func:`left_out_indices` leaves
the sample out of the last ``k`` iterations of a run and runs them again
(:func:`aimlib.amp.loop.resume`): as ``k`` grows its ``h^mu`` becomes the index of an estimate
that never saw sample ``mu``, what ``omega^mu`` stands for.  For correlated layers (two Wishart layers of
:class:`aimlib.channels.DeepAttention`) the off-diagonal entries ``O_{12}, O_{21}`` are what
one denoiser per layer adds to the one-layer term.  :func:`leave_one_out` measures, over
sampled ``mu``, the regression coefficient of ``h^mu(S^{(-mu)}) - omega_diag`` on the
off-diagonal part of the term (``omega_diag`` keeps the diagonal only): 1 if that part
is right, 0 if the leave-one-out estimates did not need it.  Book chapter "Correlated layers".
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..backend import to_host
from ..channels import sigma2
from .loop import resume
from .problem import make_problem
from .steps import channel_step, initial_state, pair_weights, prior_step

__all__ = ["LeaveOneOut", "leave_one_out", "left_out_indices", "regression"]


@dataclass(frozen=True)
class LeaveOneOut:
    """What :func:`leave_one_out` measured (root mean squares per sample over its ``T x T`` entries).

    ``coefficient`` (with its standard error over the samples) is the regression coefficient of
    the leave-one-out correction on the off-diagonal Onsager term; ``rms_full``, ``rms_diagonal``
    and ``rms_none`` are the distances of ``omega`` with the whole matrix ``O``, its diagonal only
    and no Onsager term from the leave-one-out ``h``; ``rms_cross`` is the off-diagonal term's
    size; ``onsager`` is ``O`` and ``kappa`` the noises' correlation at that iteration.
    """
    coefficient: float
    stderr: float
    rms_full: float
    rms_diagonal: float
    rms_none: float
    rms_cross: float
    onsager: tuple
    kappa: float
    samples: int


def regression(num, den) -> tuple[float, float]:
    r"""``(beta, stderr)``: the regression coefficient ``beta = sum_mu num_mu / sum_mu den_mu`` of one term on
    another over samples ``mu`` (``num_mu = <a_mu, b_mu>``, ``den_mu = <b_mu, b_mu>`` for the regression of ``a`` on
    ``b``), and its standard error from the samples' scatter,
    ``sqrt(n) std(num - beta den) / sum den``."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    beta = float(num.sum() / den.sum())
    return beta, float(np.std(num - beta * den, ddof=1) * math.sqrt(len(num)) / den.sum())


def _iterate(p, iterations):
    """``iterations`` undamped GAMP-RIE iterations from the priors' means; the last step's pieces."""
    S_hat, V, V_ons, g_prev, g_new = initial_state(p)
    for t in range(1, iterations + 1):
        delta, R, _, cov = channel_step(p, S_hat, V, V_ons, g_prev, g_new, t)
        S_hat, V, V_ons = prior_step(p, R, delta, cov=cov)
        g_prev, g_new = g_new, g_prev
    return S_hat, R, delta, cov, np.array(V_ons), g_prev


def _without(p, mu, R, delta, cov, g):
    """The estimates denoised from ``R`` with sample ``mu``'s part of the backward pass taken out."""
    xp, d, L = p.xp, p.d, len(R)
    G = g * pair_weights(p.T, xp, p.dtype)
    part = p.index.from_sums(*p.index.sums(p.X[mu:mu + 1], G[:, None]))     # h^*(G) of sample mu
    out = []
    for ell, (prior, Rl, dl) in enumerate(zip(p.priors, R, delta)):
        Rm = Rl - sum((2.0 * float(cov[ell, k]) / d) * part[k] for k in range(L))
        out.append(prior.denoise((Rm + Rm.T) / 2, dl)[0])
    return out


def leave_one_out(X, y, channel, priors, *, iterations: int = 3, samples: int = 200,
                  seed=0) -> LeaveOneOut:
    r"""Compare GAMP-RIE's Onsager-corrected ``omega`` with leave-one-out estimates (module docstring).

    Parameters
    ----------
    X, y, channel, priors
        A data set and its model, as for :func:`aimlib.amp.gamp_rie` (two or more layers;
        ``X`` an array, not a token stream).
    iterations : int
        Undamped iterations from the priors' means before the comparison (>= 2, so that
        the Onsager term is in play).
    samples : int
        How many samples ``mu`` are left out in turn (each costs one denoising per layer).
    seed : int or numpy.random.Generator
        Which samples.

    Returns
    -------
    LeaveOneOut
    """
    iterations = v.integer("iterations", iterations, minimum=2)
    p = make_problem(X, y, channel, priors, None, None, "float64", None, 64.0, 0.0, "state")
    samples = v.integer("samples", samples, minimum=2, maximum=p.n)
    S_hat, R, delta, cov, O, g = _iterate(p, iterations)
    sig2, xp = sigma2(p.T, p.xp, p.dtype), p.xp
    diag_O = np.diag(np.diag(O))
    sums = {"full": 0.0, "diagonal": 0.0, "none": 0.0}
    num, den = [], []
    for mu in v.generator(seed).choice(p.n, samples, replace=False):
        h = xp.stack([p.index.indices(p.X[mu:mu + 1], S) for S in S_hat], axis=1)[0]
        loo = xp.stack([p.index.indices(p.X[mu:mu + 1], S)
                        for S in _without(p, mu, R, delta, cov, g[mu])], axis=1)[0]
        omega = {k: to_host(h - sig2 * xp.einsum("lk,kab->lab", xp.asarray(M, dtype=p.dtype), g[mu]))
                 for k, M in (("full", O), ("diagonal", diag_O), ("none", 0 * O))}
        loo = to_host(loo)
        for k in sums:
            sums[k] += float(np.sum((omega[k] - loo) ** 2))
        cross = omega["full"] - omega["diagonal"]
        num.append(float(np.sum((loo - omega["diagonal"]) * cross)))
        den.append(float(np.sum(cross * cross)))
    if sum(den) == 0.0:
        raise ValueError("the Onsager matrix has no off-diagonal term here (one layer, or uncorrelated "
                         "layers): there is nothing to compare")
    beta, stderr = regression(num, den)
    rms = {k: math.sqrt(s / samples) for k, s in sums.items()}
    return LeaveOneOut(beta, stderr, rms["full"], rms["diagonal"], rms["none"],
                       math.sqrt(float(np.mean(den))), tuple(map(tuple, O.tolist())),
                       float(cov[0, 1] / math.sqrt(cov[0, 0] * cov[1, 1])), samples)


def left_out_indices(X, y, channel, priors, mu: int, states, t: int, steps, *, damping: float = 0.5,
                     damp: str = "both") -> dict:
    r"""The index ``h^mu`` of the estimate that iteration ``t``'s channel step uses, with sample ``mu`` left out
    of the ``k`` iterations before it, for each ``k`` in ``steps`` (module docstring).

    Parameters
    ----------
    X, y, channel, priors
        The data set and model of the run (``X`` an array), as :func:`aimlib.amp.gamp_rie` took them.
    mu : int
        The sample left out.
    states : mapping
        The run's states after its iterations, by number (:class:`~aimlib.amp.loop.IterationState`, host
        copies); ``states[t - 1 - k]`` must be there for every ``k``.
    t : int
        The channel step whose estimates ``omega^mu`` are compared.
    steps : sequence of int
        How many iterations ``k`` (``1 <= k <= t - 2``) are run again on the data less sample ``mu``,
        from ``states[t - 1 - k]`` (its outputs less row ``mu``) with ``damping`` and ``damp`` as the run's.

    Returns
    -------
    dict
        ``k -> h^mu(S_hat^(-mu, k))``, an ``(L, T, T)`` host array per ``k``.
    """
    X, y = to_host(X), to_host(y)
    mu = v.integer("mu", mu, minimum=0, maximum=len(y) - 1)
    t = v.integer("t", t, minimum=3)
    steps = [v.integer("k", k, minimum=1, maximum=t - 2) for k in steps]
    keep = np.arange(len(y)) != mu
    p = make_problem(X[keep], y[keep], channel, priors, None, None, "float64", None, 64.0, damping, damp)
    x_mu = p.xp.asarray(X[mu:mu + 1], dtype=p.dtype)
    out = {}
    for k in steps:
        start = states[t - 1 - k]
        S_hat = resume(p, dataclasses.replace(start, g=to_host(start.g)[keep]), k)
        out[k] = to_host(p.xp.stack([p.index.indices(x_mu, S) for S in S_hat], axis=1)[0])
    return out
