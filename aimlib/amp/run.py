"""GAMP-RIE on a freshly sampled data set, and its cost model (time and memory)."""
from __future__ import annotations

from .. import _validate as v
from ..backend import float_dtype, module_named
from ..channels import make_channel
from ..model import sample_dataset
from .gamp import gamp_rie
from .steps import chunk_size_for

__all__ = ["run_amp", "flops_per_iteration", "memory_footprint"]


def flops_per_iteration(n: int, T: int, d: int) -> float:
    r"""Cost model of one GAMP-RIE iteration (one index per sample), in floating-point operations.

    ``4 n T d^2`` for the two batched products ``(X S_hat) X^T`` and
    ``X^T (G X)``, plus about ``11 d^3`` for the eigendecomposition in the RIE
    and the reconstruction ``U f(L) U^T``.  With ``n = alpha d^2`` this is
    ``4 alpha T d^4 + 11 d^3``.
    """
    n = v.integer("n", n, minimum=1)
    T = v.integer("T", T, minimum=2)
    d = v.integer("d", d, minimum=1)
    return 4.0 * n * T * d * d + 11.0 * d**3


def memory_footprint(n: int, T: int, d: int, *, itemsize: int = 8, memory_mb: float = 64.0) -> dict:
    r"""Bytes held by one GAMP-RIE run (one index per sample), and what a dense implementation would hold.

    GAMP-RIE keeps the tokens (``n T d``), four ``n T^2`` arrays (``y``, two ``g``,
    ``omega``), about ten ``d x d`` matrices (estimate, ``R``, the backward sum,
    eigenvectors, history) and one chunk of ``3 c T d`` work numbers.  Building
    the per-sample measurement matrices instead takes ``n T^2 d^2`` numbers.

    Returns
    -------
    dict
        ``chunk`` (samples per chunk), ``bytes`` (this implementation) and
        ``dense_bytes`` (the ``(n, T, T, d, d)`` tensor alone).
    """
    n, T, d = v.integer("n", n, minimum=1), v.integer("T", T, minimum=2), v.integer("d", d, minimum=1)
    itemsize = v.integer("itemsize", itemsize, minimum=1)
    chunk = min(n, chunk_size_for(T, d, itemsize, v.positive("memory_mb", memory_mb)))
    ours = (n * T * d + 4 * n * T * T + 10 * d * d + 3 * chunk * T * d) * itemsize
    return {"chunk": chunk, "bytes": ours, "dense_bytes": n * T * T * d * d * itemsize}


def run_amp(channel, T: int, rho, alpha: float, d: int, seed=None, *,
            backend: str | None = None, dtype=None, tokens=None, teachers: str | None = None,
            **options) -> dict:
    """Sample a data set of the AIM and run :func:`~aimlib.amp.gamp_rie` on it.

    Parameters
    ----------
    channel : Channel or str
        A channel instance, or a name for :func:`aimlib.channels.make_channel`.
    T, rho, alpha, d :
        Tokens per sample, width ratio(s) or prior(s), ``alpha = n / d^2`` and dimension.
    teachers : {'wishart', 'centred'} or None
        The family a width ratio names (:func:`aimlib.priors.make_priors`; default Wishart,
        or the rectangular prior for a square channel); teacher and denoiser share it.
    seed : int, Generator or None
        Teacher, tokens and label noise (:func:`aimlib.model.sample_dataset`) come
        from stream 0 of :func:`aimlib._validate.run_streams`: the same teacher and
        training data as :func:`aimlib.gd.run_gd` draws from this seed.  A denoiser
        that draws (the equalising matrix of :class:`aimlib.priors.Rectangular`, the
        chain of :class:`aimlib.priors.Sampled`) takes stream ``l`` of the ``student``
        stream for layer ``l`` (:meth:`aimlib.priors.base.Prior.seeded`).
    backend : {'numpy', 'cupy'} or None
        Where the data and the iteration live.
    dtype : float32 or float64, optional
        Working precision (default float64).
    tokens : str, mapping or None
        Law of the tokens (:func:`aimlib.tokens.token_law`, default Gaussian).
        The algorithm itself assumes Gaussian tokens whatever the law.
    **options :
        Passed to :func:`~aimlib.amp.gamp_rie` (``damping``, ``tol``, ``max_iter``, ...).

    Returns
    -------
    dict
        ``alpha``, ``d``, ``seed``, ``mmse`` (the measured error), ``iterations``,
        ``seconds``, ``T``, ``rho``, ``n``, ``channel``, ``converged``, ``reason``, ``cycle``,
        ``m`` (the predicted error), ``delta``, ``teachers`` (the priors) and, with
        ``trace=True``, ``trace``.
    """
    channel = make_channel(channel)
    T = v.integer("T", T, minimum=2)
    d = v.integer("d", d, minimum=2)
    dt = float_dtype(dtype)
    module_named(backend)  # validates the backend name early
    streams = v.run_streams(seed)
    data = sample_dataset(alpha, d, T, rho, channel, streams.data, backend=backend, dtype=dt,
                          tokens=tokens, teachers=teachers)
    priors = [p.seeded(g) for p, g in zip(data.priors, v.streams(streams.student, len(data.priors)))]
    res = gamp_rie(data.X, data.y, channel, priors, S=data.S, dtype=dt, **options)
    out = {"alpha": float(alpha), "d": d, "seed": v.seed_label(seed), "mmse": res.mmse,
           "iterations": res.iterations, "seconds": res.seconds, "T": T, "rho": data.rho,
           "n": int(data.n), "channel": repr(channel), "converged": res.converged,
           "reason": res.reason, "cycle": res.cycle, "m": res.m, "delta": res.delta,
           "teachers": ", ".join(repr(p) for p in data.priors)}
    if res.trace is not None:
        out["trace"] = res.trace
    return out
