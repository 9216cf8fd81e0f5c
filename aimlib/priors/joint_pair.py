r"""GAMP-RIE's prior step for two Wishart layers denoised together, by sampling their joint posterior.

Book, chapter "Correlated layers", section "GAMP-RIE with the joint denoiser".  The channel step
of two layers hands them ``R_l = S_l + noise`` whose noises have the ``2 x 2`` covariance
``N = F_hat^{-1}`` per direction (:mod:`aimlib.amp.steps`).  :class:`JointPair` returns the joint
posterior means ``S_bar_l`` of the two Wishart teachers under that law (the posterior of
:mod:`aimlib.priors.joint`, precision ``P = N^{-1}``, sampled by Hamiltonian Monte Carlo), and
the posterior covariance per dimension

.. math::  C_{\ell\ell'} = \tfrac1d\,\mathbb E_t\,\mathrm{Tr}\big((S_{\ell,t} - \bar S_\ell)
           (S_{\ell',t} - \bar S_{\ell'})\big) .

Gaussian integration by parts gives the Jacobian of a posterior mean under Gaussian noise,
``d S_bar_l / d R_k = sum_m C_lm P_mk`` per direction; ``R`` reads the backward sums ``B``
through ``N``, so the Onsager matrix of the next channel step is
``O_ll' = sum_k (d S_bar_l / d R_k) N_kl' = C_ll'``: the posterior covariance itself, its
off-diagonal the residuals' cross-covariance ``V_12`` that the channel's ``g_out`` then takes
(:func:`aimlib.channels.deep_bayes_cross.cross_g_out`; :func:`aimlib.amp.steps.prior_step` makes
the rows).  The predicted errors are
``V_l = C_ll`` plus the Monte Carlo error of the mean (as for :class:`~aimlib.priors.Sampled`).

With ``joint=False`` each layer is denoised alone at its own noise (``P = diag(1/N_ll)``, the
two posteriors independent): the same sampler as the separable comparator, whose Onsager rows
are GAMP-RIE's ``(C_ll/N_ll) N_ll'`` (:func:`aimlib.amp.steps.onsager_rows`), the channel's ``V_12 = 0``
and ``C_12`` zero up to the chains' noise.
The chain starts at a prior draw and carries its last state to the next call (the posterior
moves little between iterations): make one :class:`JointPair` per run.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import get_array_module
from .hmc import hmc
from .joint import joint_first_step, joint_potential, layer_pair
from .sampled import N_BATCHES, chain_settings, refuse
from .wishart import Wishart, teacher_width

__all__ = ["JointPair"]

#: the pairs of layers whose traces the chain accumulates: (1, 1), (2, 2), (1, 2)
_PAIRS = ((0, 0), (1, 1), (0, 1))


class JointPair:
    """The joint (or, ``joint=False``, the one-layer-at-a-time) sampled denoiser of two Wishart layers.

    Parameters
    ----------
    rho : float or pair
        Each layer's width ratio (one value serves both), finite.
    joint : bool
        Denoise the pair under the noises' correlation (default), or each layer alone.
    seed : int, Generator or None
        Draws the chain's start (a prior draw, at the first call) and then the chain.
    n_steps, warmup
        HMC trajectories per call and the share of them that tunes the step size.

    Passed as ``rho`` to :func:`aimlib.amp.gamp_rie` (two-layer ``deep-hardmax`` channel,
    ``T = 2``), it replaces the two RIEs by its :meth:`denoise` (module docstring).
    """

    def __init__(self, rho=0.5, *, joint: bool = True, seed=None, n_steps: int = 200, warmup: float = 0.3):
        self.rhos = layer_pair("rho", rho, lambda name, x: v.rho(x))
        self.priors = tuple(Wishart(r) for r in self.rhos)
        self.joint = bool(joint)
        self.n_steps, self.warmup, self.n_warmup = chain_settings(n_steps, warmup)
        self._rng = v.generator(seed)
        self._chain = None

    def __repr__(self) -> str:
        return (f"JointPair(rho={self.rhos}, joint={self.joint}, n_steps={self.n_steps}, "
                f"warmup={self.warmup:g})")

    def seeded(self, seed) -> "JointPair":
        """A fresh denoiser with the same settings whose chain is drawn from ``seed``."""
        return JointPair(self.rhos, joint=self.joint, seed=seed, n_steps=self.n_steps, warmup=self.warmup)

    def _start(self, d: int, xp):
        """The chain's factors: a prior draw at the first call at dimension ``d``, then the last state."""
        if self._chain is None or self._chain[0].shape[0] != d:
            self._chain = tuple(xp.asarray(self._rng.standard_normal((d, teacher_width(d, r)))) for r in self.rhos)
        return self._chain

    def precision(self, cov) -> np.ndarray:
        """``P``: ``N^{-1}`` (joint) or ``diag(1/N_ll)`` (each layer alone); ``N`` must be positive definite."""
        N = np.asarray(cov, dtype=float)
        if N.shape != (2, 2) or not np.all(np.isfinite(N)) or np.linalg.eigvalsh((N + N.T) / 2).min() <= 0:
            raise ValueError(f"cov must be the noises' positive definite 2 x 2 covariance, got {N.tolist()}")
        return np.linalg.inv(N) if self.joint else np.diag(1.0 / np.diag(N))

    def denoise(self, R, cov):
        """``(S_bar, V, C)``: the posterior means, each layer's ``(V_l,)`` and the posterior covariance ``C``.

        ``R`` the two effective observations (``d x d``), ``cov`` their noises' covariance ``N``.
        Raises :class:`~aimlib.errors.ConvergenceError` if the chain's acceptance is too low.
        """
        P, xp, d = self.precision(cov), get_array_module(R[0]), R[0].shape[0]
        n_kept = self.n_steps - self.n_warmup
        sums = xp.zeros((N_BATCHES, 2, d, d), dtype=R[0].dtype)
        traces, sizes = np.zeros(3), np.zeros(N_BATCHES, dtype=int)

        def visit(S):
            k = sizes.sum() * N_BATCHES // n_kept
            for ell in range(2):
                sums[k, ell] += S[ell]
            traces[:] += [float((S[a] * S[b]).sum()) for a, b in _PAIRS]
            sizes[k] += 1

        step, n_leapfrog = joint_first_step(self.rhos, P)
        W, acc, _ = hmc(self._start(d, xp), lambda X: joint_potential(X, R, P, self.rhos), visit, n_steps=self.n_steps,
                        n_warmup=self.n_warmup, step=step, n_leapfrog=n_leapfrog, rng=self._rng)
        self._chain = W
        refuse(acc, f"in GAMP's joint prior step at cov={np.round(np.asarray(cov), 6).tolist()}",
               "joint posterior sampling of two layers")
        F = sums.sum(axis=0) / n_kept
        means = sums / xp.asarray(sizes, dtype=F.dtype)[:, None, None, None] - F
        mc = np.array([sum(float((m[a] * m[b]).sum()) for m in means) for a, b in _PAIRS])
        mc /= N_BATCHES * (N_BATCHES - 1)
        post = traces / n_kept - [float((F[a] * F[b]).sum()) for a, b in _PAIRS] + mc
        C = np.array([[post[0], post[2]], [post[2], post[1]]]) / d
        return [F[0], F[1]], [(float(C[0, 0] + mc[0] / d),), (float(C[1, 1] + mc[1] / d),)], C
