r"""Sampling the attention-indexed model (AIM) at finite dimension.

Conventions (book, chapter "The model"):

* tokens: a sample is ``X`` of shape ``(T, d)`` with i.i.d. ``N(0, 1)``
  entries; a batch has shape ``(n, T, d)`` (other token laws: :mod:`aimlib.tokens`),
  held as an array or, for a law with ``storage='regenerate'``, regenerated chunk by
  chunk whenever it is read (:class:`aimlib.tokens.TokenStream`);
* teacher: ``S = W W^T / sqrt(r d)`` with ``W`` of shape ``(d, r)``, i.i.d.
  ``N(0, 1)``, and width ratio ``rho = r / d``;
* attention indices: ``h_ab = x_a^T S x_b / sqrt(d) - delta_ab Tr(S) / sqrt(d)``;
* several indices per sample: a channel that reads ``L`` index matrices
  (``channel.n_indices``) gets ``L`` independent teachers ``S_l`` of width
  ratios ``rho_l``, stacked as ``(L, d, d)``, and indices of shape ``(n, L, T, T)``;
* output: ``y = f(h)`` for a channel ``f`` from :mod:`aimlib.channels`;
* sample complexity: ``alpha = n / d^2``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _validate as v
from .backend import get_array_module, module_named, to_common, to_device, to_host
from .channels import Channel
from .priors import Wishart, make_prior, make_priors, teacher_width
from .tokens import TOKEN_CHUNK, TokenStream, draw_threads, token_law, token_stream

__all__ = ["teacher_width", "sample_teacher", "sample_tokens", "attention_indices", "index_chunk_size",
           "streamed_indices", "widths", "n_samples", "dataset_bytes", "Dataset", "estimation_error",
           "matrix_overlap", "sample_dataset", "index_covariance", "index_excess_kurtosis"]


def sample_teacher(d: int, rho: float, seed=None, *, backend: str | None = None, dtype=np.float64):
    r"""Sample the tied key-query matrix ``S = W W^T / sqrt(r d)`` (:meth:`aimlib.priors.Wishart.sample`).

    Parameters
    ----------
    d : int
        Token dimension, ``d >= 1``.
    rho : float
        Width ratio ``r / d > 0``; the width used is ``r = round(rho d)``.
    seed : int, Generator or None
        Source of randomness.
    backend : {'numpy', 'cupy'} or None
        Array module of the result (default: :func:`aimlib.backend.default_module`).

    Returns
    -------
    S : array of shape (d, d)
        Symmetric, positive semi-definite, with ``Tr(S)/d -> sqrt(rho)`` and
        ``Tr(S^2)/d -> 1 + rho``.
    """
    return Wishart(rho).sample(v.integer("d", d, minimum=1), seed, xp=module_named(backend), dtype=dtype)


def sample_tokens(n: int, T: int, d: int, seed=None, *, backend: str | None = None, dtype=np.float64,
                  tokens=None):
    """Sample ``n`` sequences of ``T`` i.i.d. tokens in ``R^d``: shape ``(n, T, d)``.

    ``tokens`` names the law of a token (:func:`aimlib.tokens.token_law`); the
    default is i.i.d. standard Gaussian entries.
    """
    n = v.integer("n", n, minimum=1)
    T = v.integer("T", T, minimum=2)
    d = v.integer("d", d, minimum=1)
    X = token_law(tokens).sample(v.generator(seed), (n, T, d)).astype(dtype)
    return to_device(X, module_named(backend))


def indices_from_factors(left, right, trace, norm: float, *, symmetric: bool = False):
    r"""The attention-index formula, ``h = (L R^T - Tr(S) I) / norm``: its one definition.

    .. math::  h_{ab} = \frac{\ell_a^\top r_b - \delta_{ab} \operatorname{Tr} S}{\nu}

    with ``l_a``, ``r_b`` the rows of ``left`` and ``right``.  Tokens ``X`` and a
    key-query matrix ``S`` give the indices ``h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d)``
    of :func:`attention_indices` with ``left = X S``, ``right = X``, ``trace = Tr S``,
    ``norm = sqrt(d)``; a factorised ``S = W W^T / sqrt(r d)`` gives them without
    forming ``S`` (the students of :mod:`aimlib.gd`) with ``left = right = X W``,
    ``trace = ||W||_F^2``, ``norm = sqrt(r) d``.  No checks: callers validate.

    Parameters
    ----------
    left, right : arrays of shape (..., T, m)
        Broadcasting in their leading axes.
    trace : array
        ``Tr S``: 0-d, or one value per index of the leading axes of ``h``
        (shape ``h.shape[:j]``, broadcast over the rest).
    norm : float
        The normalisation ``nu`` (a Python float, so the inputs' precision is kept).
    symmetric : bool
        Return ``(h + h^T)/2`` (the tied model: ``h_ab = h_ba`` exactly, not up to rounding).

    Returns
    -------
    h : array of shape (..., T, T)
    """
    xp = get_array_module(left, right)
    h = left @ xp.swapaxes(right, -1, -2) / norm
    trace = trace.reshape(trace.shape + (1,) * (h.ndim - trace.ndim))
    h = h - xp.eye(h.shape[-1], dtype=h.dtype) * (trace / norm)
    return (h + xp.swapaxes(h, -1, -2)) / 2 if symmetric else h


def _key_query(S, d: int, symmetric: bool) -> tuple[list, bool]:
    """``S`` of shape ``(d, d)`` or ``(L, d, d)``: its checked ``(d, d)`` matrices, and whether it is a stack."""
    S = v.finite_array("S", S)
    if S.ndim not in (2, 3):
        raise ValueError(f"S must have shape ({d}, {d}) or (L, {d}, {d}), got {tuple(S.shape)}")
    stack = [S] if S.ndim == 2 else [S[i] for i in range(S.shape[0])]
    for i, M in enumerate(stack):
        name = "S" if S.ndim == 2 else f"S[{i}]"
        if tuple(M.shape) != (d, d):
            raise ValueError(f"{name} must have shape ({d}, {d}) to match X, got {tuple(M.shape)}")
        if symmetric:
            v.symmetric_matrix(name, M)
    return stack, S.ndim == 3


def index_chunk_size(T: int, d: int, itemsize: int, L: int, memory_mb: float) -> int:
    """Samples per chunk of :func:`attention_indices` so that its work arrays fit in ``memory_mb``.

    A chunk of ``c`` samples holds ``X S`` (``c T d`` numbers), four ``c T^2``
    temporaries and the ``L`` indices of the chunk: ``c (T d + (4 + L) T^2)``
    numbers of ``itemsize`` bytes.
    """
    T, d = v.integer("T", T, minimum=1), v.integer("d", d, minimum=1)
    itemsize, L = v.integer("itemsize", itemsize, minimum=1), v.integer("L", L, minimum=1)
    per_sample = (T * d + (4 + L) * T * T) * itemsize
    return max(1, int(v.positive("memory_mb", memory_mb) * 2**20 // per_sample))


def attention_indices(X, S, *, symmetric: bool = True, chunk_size: int | None = None,
                      memory_mb: float = v.MEMORY_MB):
    r"""Attention indices ``h = X S X^T / sqrt(d) - I_T Tr(S) / sqrt(d)`` for a batch.

    .. math::  h^\mu_{ab} = \frac{x_a^{\mu\top} S x^\mu_b - \delta_{ab} \operatorname{Tr} S}{\sqrt d}

    (:func:`indices_from_factors` with ``X S`` and ``X``), computed in chunks of
    samples so that the work arrays stay within ``memory_mb``.

    Parameters
    ----------
    X : array of shape (n, T, d)
        Token sequences.
    S : array of shape (d, d), or (L, d, d) for ``L`` teachers
        Real key-query matrix (matrices); symmetric unless ``symmetric=False``.
    symmetric : bool
        ``True`` (the tied model): ``S`` must be symmetric and ``h`` is
        symmetrised, ``(h + h^T)/2``, so that ``h_ab = h_ba`` exactly.  ``False``
        (the untied model, :mod:`aimlib.untied`): any real square ``S``, and
        ``h_ab != h_ba``.
    chunk_size : int or None
        Samples per chunk (default: :func:`index_chunk_size` of ``memory_mb``).
    memory_mb : float
        Budget in MiB of the work arrays of a chunk (beyond ``X``, ``S`` and ``h``).

    Returns
    -------
    h : array of shape (n, T, T), or (n, L, T, T)
        The trace subtraction removes the ``O(sqrt(d))`` mean of the diagonal
        (tied), so every entry is ``O(1)``.  A CuPy array if ``X`` or ``S`` is one;
        the dtype of ``X S`` (the inputs' precision).
    """
    X = v.finite_array("X", X, ndim=3)
    n, T, d = X.shape
    if not isinstance(symmetric, (bool, np.bool_)):
        raise TypeError(f"symmetric must be True or False, got {symmetric!r}")
    mats, stacked = _key_query(S, d, symmetric)
    xp, X, *mats = to_common(X, *mats)
    itemsize = xp.result_type(X.dtype, mats[0].dtype).itemsize
    size = index_chunk_size(T, d, itemsize, len(mats), memory_mb)
    size = min(n, size if chunk_size is None else v.integer("chunk_size", chunk_size, minimum=1))

    def chunk(s: int):
        Xc = X[s:s + size]
        hs = [indices_from_factors(Xc @ M, Xc, xp.trace(M), math.sqrt(d), symmetric=symmetric) for M in mats]
        return xp.stack(hs, axis=1) if stacked else hs[0]

    first = chunk(0)
    if size == n:
        return first
    h = xp.empty((n,) + first.shape[1:], dtype=first.dtype)
    h[:size] = first
    for s in range(size, n, size):
        h[s:s + size] = chunk(s)
    return h


def streamed_indices(X: TokenStream, S, *, symmetric: bool = True, memory_mb: float = v.MEMORY_MB):
    """:func:`attention_indices` of regenerated tokens, a few chunks of the stream at a time (one read).

    Equal to ``attention_indices(X.materialise(), S, ...)`` up to rounding, without holding the tokens.
    """
    if not isinstance(X, TokenStream):
        raise TypeError(f"X must be an aimlib.tokens.TokenStream, got {type(X).__name__}")
    step = X.chunk * draw_threads()     # one read draws that many chunks at once
    parts = [attention_indices(X[s:s + step], S, symmetric=symmetric, memory_mb=memory_mb)
             for s in range(0, X.n, step)]
    return parts[0] if len(parts) == 1 else get_array_module(parts[0]).concatenate(parts)


#: more samples than this can never be held in memory (:func:`aimlib._validate.sample_count`)
N_MAX = v.N_MAX


def widths(channel, rho) -> tuple:
    """The width ratios ``(rho_1, ..., rho_L)`` of a channel's ``L`` teachers, validated."""
    L = channel.n_indices
    rhos = tuple(np.atleast_1d(np.asarray(rho, dtype=float)).tolist()) if L > 1 else (rho,)
    if len(rhos) != L:
        raise ValueError(f"rho must hold {L} width ratios (one per index of {channel!r}), got {len(rhos)}")
    return tuple(v.rho(r) for r in rhos)


def n_samples(alpha: float, d: int) -> int:
    """Number of samples ``n = round(alpha d^2)``, from ``1`` to ``N_MAX``: an ``alpha`` outside
    is refused (:func:`aimlib._validate.sample_count`, the one rule)."""
    return v.sample_count(alpha, d)


def dataset_bytes(n: int, d: int, T: int, rhos=(1.0,), itemsize: int = 8, *, stored_tokens: bool = True) -> int:
    """Bytes of a sampled data set: tokens, indices, outputs and teachers, plus the float64 draws.

    ``rhos`` holds one width ratio (the Wishart prior) or prior per teacher; a
    teacher's draws are :meth:`aimlib.priors.base.Prior.draw_numbers`.  Tokens that
    are not stored (``stored_tokens=False``) take one read of :func:`~aimlib.tokens.draw_threads`
    chunks of :data:`~aimlib.tokens.TOKEN_CHUNK` samples at a time.
    """
    L = len(rhos)
    draws = sum(make_prior(r).draw_numbers(d) for r in rhos)
    held = n if stored_tokens else min(n, TOKEN_CHUNK * draw_threads())
    return itemsize * (held * T * d + 2 * n * L * T * T + L * d * d) + 8 * (held * T * d + draws + L * d * d)


@dataclass
class Dataset:
    """A sampled AIM data set: teacher ``S``, tokens ``X``, indices ``h``, outputs ``y``.

    ``X`` is an array, or a :class:`~aimlib.tokens.TokenStream` when the token law's
    storage is ``'regenerate'`` (``X.materialise()``: the same tokens as an array).
    With ``L > 1`` indices per sample, ``S`` has shape ``(L, d, d)``, ``h`` shape
    ``(n, L, T, T)`` and ``rho`` is a tuple of ``L`` width ratios.  ``priors`` are the
    teachers' priors (:mod:`aimlib.priors`).
    """

    S: object
    X: object
    h: object
    y: object
    channel: Channel
    alpha: float
    rho: float | tuple
    priors: tuple = ()

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def T(self) -> int:
        return self.X.shape[1]

    @property
    def d(self) -> int:
        return self.X.shape[2]


def sample_dataset(alpha: float, d: int, T: int, rho: float, channel: Channel, seed=None,
                   *, backend: str | None = None, dtype=np.float64, memory_mb: float = v.MEMORY_MB,
                   tokens=None, teachers: str | None = None) -> Dataset:
    """Sample teacher(s), ``n = round(alpha d^2)`` sequences and their outputs.

    One seed drives all draws (teachers in layer order, tokens, label noise)
    through a single Generator, so the data set is reproducible on every backend.
    ``rho`` is one width ratio or prior, or ``channel.n_indices`` of them; a width
    ratio names a teacher of the family ``teachers`` (:func:`aimlib.priors.make_priors`:
    ``'wishart'`` by default, ``'centred'`` for ``S - sqrt(rho) I``).  Sizes whose
    arrays (:func:`dataset_bytes`) exceed ``memory_mb`` MiB are refused before
    anything is allocated, with an error naming the parameter to lower.
    ``tokens`` is the token law (:func:`aimlib.tokens.token_law`, default Gaussian).  Its
    ``storage='regenerate'`` keeps no tokens (``X`` a :class:`~aimlib.tokens.TokenStream` keyed by
    the next draw of the seed's Generator, the indices computed chunk by chunk): memory
    ``O(TOKEN_CHUNK T d + d^2)`` beyond the ``n T^2`` outputs, other tokens than the stored
    draw of the same seed.
    """
    tokens = token_law(tokens)
    if not isinstance(channel, Channel):
        raise TypeError(f"channel must be an aimlib.channels.Channel, got {type(channel).__name__}")
    rng = v.generator(seed)
    alpha, d = v.positive("alpha", alpha), v.integer("d", d, minimum=1)
    L = channel.n_indices
    priors = make_priors(channel, rho, teachers)
    T = v.integer("T", T, minimum=2)
    itemsize = np.dtype(dtype).itemsize
    # memory first (every size, T included, may be the one to lower), then the cap on n
    stored = tokens.storage == "store"
    v.check_memory(lambda n, d, T: dataset_bytes(n, d, T, priors, itemsize, stored_tokens=stored),
                   {"n": v.requested_samples(alpha, d), "d": d, "T": T},
                   v.positive("memory_mb", memory_mb), what="the arrays of the data set",
                   via={"n": ("alpha", alpha, d * d)})
    n = n_samples(alpha, d)
    mats = [p.sample(d, rng, xp=module_named(backend), dtype=dtype) for p in priors]
    S = mats[0] if L == 1 else get_array_module(mats[0]).stack(mats)
    if stored:
        X = sample_tokens(n, T, d, rng, backend=backend, dtype=dtype, tokens=tokens)
        h = attention_indices(X, S, symmetric=not channel.square, memory_mb=memory_mb)
    else:
        X = token_stream(n, T, d, rng, tokens, xp=module_named(backend), dtype=dtype)
        h = streamed_indices(X, S, symmetric=not channel.square, memory_mb=memory_mb)
    y = channel(h, rng)
    return Dataset(S=S, X=X, h=h, y=y, channel=channel, alpha=float(alpha),
                   rho=priors[0].rho if L == 1 else tuple(p.rho for p in priors), priors=priors)


def index_covariance(S, S_prime=None) -> float:
    r"""Exact covariance of off-diagonal indices built from ``S`` and ``S'``.

    For fixed symmetric ``S, S'`` and Gaussian tokens,
    ``E[h_ab(S) h_ab(S')] = Tr(S S') / d`` for ``a != b`` and twice that for
    ``a = b``; entries at different positions are uncorrelated.  With
    ``S' = S`` this is ``Q0 = Tr(S^2)/d``.
    """
    S = v.symmetric_matrix("S", S)
    S_prime = S if S_prime is None else v.symmetric_matrix("S_prime", S_prime)
    if S_prime.shape != S.shape:
        raise ValueError(f"S_prime must have shape {tuple(S.shape)}, got {tuple(S_prime.shape)}")
    xp, S, S_prime = to_common(S, S_prime)
    return float(xp.sum(S * S_prime)) / S.shape[0]


def index_excess_kurtosis(S) -> tuple[float, float]:
    r"""Exact excess kurtosis of an off-diagonal and a diagonal index, for fixed ``S``.

    With ``t_k = Tr(S^k)``: the bilinear form ``x^T S y`` has excess kurtosis
    ``6 t_4 / t_2^2`` and the centred quadratic form ``x^T S x - t_1`` has
    ``12 t_4 / t_2^2`` (its cumulants are ``2^{k-1} (k-1)! t_k``).  Both
    vanish like ``1/d``: the indices become Gaussian as ``d`` grows.

    Returns
    -------
    (off_diagonal, diagonal) : tuple of float
    """
    S = v.symmetric_matrix("S", S)
    xp = get_array_module(S)
    S2 = S @ S
    t2 = float(xp.trace(S2))
    t4 = float(xp.sum(S2 * S2))
    return 6 * t4 / t2**2, 12 * t4 / t2**2


def matrix_overlap(A, B) -> float:
    r"""``(1/d) Tr(A B)`` of two symmetric ``d x d`` matrices: an overlap such as ``q = (1/d) Tr(S_hat S)``,
    or the residual cross-covariance ``e_12`` of two layers' estimates (``A, B`` their residuals)."""
    if A.shape != B.shape or A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A and B must be square matrices of one shape, got {tuple(A.shape)} and {tuple(B.shape)}")
    return float((A * B).sum()) / A.shape[0]


def estimation_error(S_hat, S) -> float | np.ndarray:
    r"""``(1/d) ||S_hat - S||_F^2`` (one value per matrix if ``S_hat`` has shape ``(k, d, d)``)."""
    S = v.finite_array("S", S, ndim=2)
    S_hat = v.finite_array("S_hat", S_hat)
    if S_hat.shape[-2:] != S.shape or S_hat.ndim not in (2, 3):
        raise ValueError(f"S_hat must have shape {tuple(S.shape)} or (k, *{tuple(S.shape)}), got {tuple(S_hat.shape)}")
    _, S_hat, S = to_common(S_hat, S)
    diff = S_hat - S
    e = (diff * diff).sum(axis=(-2, -1)) / S.shape[0]
    return float(e) if S_hat.ndim == 2 else to_host(e)
