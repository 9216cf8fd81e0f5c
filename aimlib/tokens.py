r"""Token laws: the distribution of the entries of the tokens ``x in R^d``.

The solvable model has i.i.d. standard Gaussian entries (``gaussian``, the
default).  The other laws keep mean 0 and variance 1 per entry:

``rademacher``
    ``x_i = +-1`` with probability 1/2; ``E x^4 = 1``.
``uniform``
    uniform on ``[-sqrt 3, sqrt 3]``; ``E x^4 = 9/5``.
``sparse`` (parameter ``p`` in ``(0, 1]``, default 0.1)
    Bernoulli(``p``)-Gaussian, ``x_i = b_i g_i / sqrt(p)``; ``E x^4 = 3/p``.
``student-t`` (parameter ``nu > 2``, default 5)
    Student's t with ``nu`` degrees of freedom times ``sqrt((nu - 2)/nu)``;
    ``E x^4 = 3 (nu - 2)/(nu - 4)`` for ``nu > 4`` (infinite otherwise).
``correlated`` (parameter ``c`` in ``(-1, 1)``, or ``cov``)
    ``x = C^{1/2} z`` with ``z`` standard Gaussian and the symmetric square
    root of ``C``: ``C_ij = c^{|i-j|}`` (:func:`toeplitz_covariance`) or a
    given symmetric positive-definite ``cov`` of shape ``(d, d)``.

A law is named by a string or a mapping ``{"name": ..., <params>}``
(:func:`token_law`).

Storage.  A data set holds its tokens (``storage: store``, the default), or
regenerates them whenever they are read (``storage: regenerate``): a
:class:`TokenStream` draws the chunk ``k`` of :data:`TOKEN_CHUNK` samples from
its own counter-based generator, NumPy's ``Philox`` keyed by ``SeedSequence(key,
spawn_key=(k,))``, so a chunk is the same whenever and in whatever order it is
read, one pass over the data costs the draws again, and the memory is that of a
chunk, ``O(TOKEN_CHUNK T d)``, whatever ``n``.  A read of several chunks draws them
on several host threads (:func:`draw_threads`).  :meth:`TokenStream.materialise`
stores the same draws.  The draws are made on the host and moved to the
stream's array module, so NumPy and CuPy read the same tokens.
"""
from __future__ import annotations

import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from . import _validate as v
from .backend import backend_name, module_named, to_device

__all__ = ["LAWS", "STORAGES", "TOKEN_CHUNK", "TokenLaw", "TokenStream", "draw_threads", "token_law",
           "token_stream", "toeplitz_covariance", "covariance_sqrt"]

#: law -> its parameters with their defaults
LAWS = {"gaussian": {}, "rademacher": {}, "uniform": {}, "sparse": {"p": 0.1},
        "student-t": {"nu": 5.0}, "correlated": {"c": None, "cov": None}}
#: how a data set holds its tokens (module docstring)
STORAGES = ("store", "regenerate")
#: samples per chunk of a :class:`TokenStream`: part of what a seed draws, so fixed
TOKEN_CHUNK = 256


def toeplitz_covariance(d: int, c: float) -> np.ndarray:
    """The covariance ``C_ij = c^{|i-j|}`` (an AR(1) sequence of unit variance), ``|c| < 1``."""
    d = v.integer("d", d, minimum=1)
    c = v.bounded("c", c, low=-1, high=1, low_open=True, high_open=True)
    k = np.arange(d)
    return np.power(c, np.abs(k[:, None] - k[None, :]).astype(float))


def covariance_sqrt(cov, d: int | None = None) -> np.ndarray:
    """The symmetric square root ``C^{1/2}`` of a symmetric positive-definite ``cov``.

    Raises ``ValueError`` naming ``cov`` if it is not square of side ``d``,
    not symmetric or not positive definite.
    """
    C = v.symmetric_matrix("cov", np.asarray(cov, dtype=float))
    if d is not None and C.shape != (d, d):
        raise ValueError(f"cov must have shape ({d}, {d}) to match d, got {C.shape}")
    lam, U = np.linalg.eigh(C)
    if lam[0] <= 1e-12 * max(1.0, lam[-1]):
        raise ValueError(f"cov must be positive definite, got smallest eigenvalue {lam[0]:.3g}")
    return (U * np.sqrt(lam)) @ U.T


@dataclass(frozen=True)
class TokenLaw:
    """A validated token law: ``name`` and its parameters as sorted ``(key, value)`` pairs.

    ``storage`` says how a data set of this law holds its tokens (:data:`STORAGES`):
    ``'regenerate'`` makes :func:`aimlib.model.sample_dataset` hold a :class:`TokenStream`.
    """

    name: str = "gaussian"
    params: tuple = ()
    storage: str = "store"

    def to_dict(self) -> dict:
        """The mapping ``{"name": ..., **params}`` (``cov`` as nested lists)."""
        p = {k: (x.tolist() if isinstance(x, np.ndarray) else x) for k, x in self.params}
        return {"name": self.name, **p, **({"storage": self.storage} if self.storage != "store" else {})}

    def fourth_moment(self) -> float:
        """``E x_i^4`` of one entry (``inf`` for a Student t with ``nu <= 4``)."""
        p = dict(self.params)
        if self.name == "rademacher":
            return 1.0
        if self.name == "uniform":
            return 9.0 / 5.0
        if self.name == "sparse":
            return 3.0 / p["p"]
        if self.name == "student-t":
            nu = p["nu"]
            return 3.0 * (nu - 2.0) / (nu - 4.0) if nu > 4 else math.inf
        return 3.0

    def covariance(self, d: int) -> np.ndarray:
        """The covariance of one token in ``R^d`` (the identity except for ``correlated``)."""
        p = dict(self.params)
        if self.name != "correlated":
            return np.eye(d)
        if "c" in p:
            return toeplitz_covariance(d, p["c"])
        C = np.asarray(p["cov"], dtype=float)
        covariance_sqrt(C, d)
        return C

    def with_storage(self, storage: str) -> "TokenLaw":
        """The same law with the storage ``storage`` (:data:`STORAGES`)."""
        return replace(self, storage=v.choice("tokens_storage", storage, STORAGES))

    def covariance_root(self, d: int) -> np.ndarray | None:
        """``C^{1/2}`` of a ``correlated`` law in ``R^d`` (None for the others)."""
        return covariance_sqrt(self.covariance(d)) if self.name == "correlated" else None

    def sample(self, rng: np.random.Generator, shape: tuple, root=None) -> np.ndarray:
        """Float64 draws of shape ``shape`` (last axis ``d``) from ``rng``.

        ``gaussian`` draws exactly ``rng.standard_normal(shape)``; ``root`` is
        :meth:`covariance_root`, computed here when not given.
        """
        p = dict(self.params)
        if self.name == "gaussian":
            return rng.standard_normal(shape)
        if self.name == "rademacher":
            return 2.0 * rng.integers(0, 2, size=shape).astype(float) - 1.0
        if self.name == "uniform":
            return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), size=shape)
        if self.name == "sparse":
            mask = rng.random(shape) < p["p"]
            return mask * rng.standard_normal(shape) / math.sqrt(p["p"])
        if self.name == "student-t":
            nu = p["nu"]
            return rng.standard_t(nu, size=shape) * math.sqrt((nu - 2.0) / nu)
        root = self.covariance_root(shape[-1]) if root is None else root
        return rng.standard_normal(shape) @ root


def _param(name: str, key: str, value):
    """One validated parameter of law ``name``."""
    if key == "p":
        return v.bounded("tokens.p", value, low=0, high=1, low_open=True)
    if key == "nu":
        return v.bounded("tokens.nu", value, low=2, low_open=True)
    if key == "c":
        return v.bounded("tokens.c", value, low=-1, high=1, low_open=True, high_open=True)
    C = v.symmetric_matrix("tokens.cov", np.asarray(value, dtype=float))
    covariance_sqrt(C)
    return C


def parse_token_law(text: str) -> TokenLaw:
    """A law from text (the command line's ``--tokens``): a name, or a JSON object of ``name`` and parameters.

    Raises ``ValueError`` naming ``tokens``: for a ``storage`` key (the command line's
    ``--tokens-storage``), for text that is neither, for JSON
    nested deeper than :data:`MAX_DEPTH` (also where ``json`` itself would
    recurse too deeply), and (from :func:`token_law`) for a law or parameter
    out of range.
    """
    text = str(text).strip()
    try:
        spec = json.loads(text) if text.startswith("{") else text
    except json.JSONDecodeError as exc:
        raise ValueError(f"tokens must be a law name or a JSON object, got {v.shortened(text)!r} "
                         f"({exc.msg})") from None
    except RecursionError:  # thousands of nested brackets
        spec = None
    if isinstance(spec, dict) and "storage" in spec:
        raise ValueError("tokens names a law and its parameters; how the tokens are held is --tokens-storage")
    depth = _depth(spec) if spec is not None else MAX_DEPTH + 1
    if depth > MAX_DEPTH:
        got = "more" if spec is None else depth
        raise ValueError(f"tokens must be a JSON object nested at most {MAX_DEPTH} levels deep (a law's "
                         f"parameters are numbers, or for cov a list of lists), got {got}")
    return token_law(spec)


#: nesting of a JSON law: the object, ``cov``, its rows
MAX_DEPTH = 3


def _depth(x) -> int:
    """Nesting depth of parsed JSON (``1`` for an object of numbers), without recursion."""
    deepest, stack = 0, [(x, 1)]
    while stack:
        y, level = stack.pop()
        if isinstance(y, dict):
            y = list(y.values())
        if isinstance(y, list):
            deepest = max(deepest, level)
            stack.extend((z, level + 1) for z in y)
    return deepest


def token_law(tokens=None) -> TokenLaw:
    """A :class:`TokenLaw` from ``None`` (gaussian), a name, a mapping or a law.

    A mapping holds ``name``, the law's parameters (:data:`LAWS`; omitted ones take
    their defaults) and optionally ``storage`` (:data:`STORAGES`).  ``correlated``
    needs exactly one of ``c`` and ``cov``.  Errors name the parameter and its range.
    """
    if tokens is None or isinstance(tokens, TokenLaw):
        return tokens or TokenLaw()
    if isinstance(tokens, str):
        tokens = {"name": tokens}
    if not isinstance(tokens, dict):
        raise TypeError(f"tokens must be a law name, a mapping or None, got {type(tokens).__name__}")
    spec = dict(tokens)
    name = v.choice("tokens.name", spec.pop("name", None), tuple(LAWS))
    storage = v.choice("tokens.storage", spec.pop("storage", "store"), STORAGES)
    for k in spec:
        if k not in LAWS[name]:
            allowed = ", ".join(LAWS[name]) or "none"
            raise ValueError(f"tokens.{k} is not a parameter of law {name!r} (allowed: {allowed})")
    if name == "correlated" and (("c" in spec) == ("cov" in spec)):
        raise ValueError("tokens of law 'correlated' need exactly one of tokens.c and tokens.cov")
    params = {k: x for k, x in LAWS[name].items() if x is not None}
    params.update({k: _param(name, k, x) for k, x in spec.items()})
    return TokenLaw(name, tuple(sorted(params.items())), storage)


@dataclass(frozen=True)
class TokenStream:
    """The tokens of ``n`` samples, regenerated chunk by chunk whenever they are read (module docstring).

    Reads like an array of shape ``(n, T, d)`` sliced along its first axis
    (``X[s:s + c]``, an array of the module ``xp``, default numpy); chunk ``k`` (samples ``k chunk`` to
    ``(k + 1) chunk``) is ``law.sample`` from ``Generator(Philox(SeedSequence(key,
    spawn_key=(k,))))``.  Nothing is held but the law, the key and the covariance root
    of a ``correlated`` law.  Made by :func:`token_stream`; :meth:`window` is a run of its
    chunks as a stream of its own (chunk ``first + k`` of the parent), for a shard of the samples.
    """

    law: TokenLaw
    n: int
    T: int
    d: int
    key: tuple
    dtype: Any = np.float64
    xp: Any = None          # the array module; None: numpy (set in __post_init__)
    chunk: int = TOKEN_CHUNK
    root: Any = None
    first: int = 0

    def __post_init__(self):
        if self.xp is None:
            object.__setattr__(self, "xp", np)

    @property
    def shape(self) -> tuple:
        return (self.n, self.T, self.d)

    @property
    def ndim(self) -> int:
        return 3

    @property
    def stored_bytes(self) -> int:
        """What holding the tokens would take."""
        return self.n * self.T * self.d * np.dtype(self.dtype).itemsize

    def on(self, xp, dtype) -> "TokenStream":
        """The same draws, read as arrays of ``xp`` in ``dtype``."""
        return replace(self, xp=xp, dtype=np.dtype(dtype))

    def block(self, k: int):
        """Chunk ``k``: the tokens of samples ``k chunk`` to ``min((k + 1) chunk, n)``."""
        rows = min(self.chunk, self.n - k * self.chunk)
        seq = np.random.SeedSequence(list(self.key), spawn_key=(self.first + k,))
        rng = np.random.Generator(np.random.Philox(seq))
        X = self.law.sample(rng, (rows, self.T, self.d), self.root).astype(self.dtype, copy=False)
        return to_device(X, self.xp)

    def blocks(self, ks) -> list:
        """Chunks ``ks``, drawn on up to :func:`draw_threads` host threads at once (each chunk is a
        function of its index alone, so the threads change the time, never the draws)."""
        ks = list(ks)
        threads = min(len(ks), draw_threads())
        if threads <= 1:
            return [self.block(k) for k in ks]
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(self.block, ks))

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"a TokenStream is read in slices of samples X[start:stop], got {key!r}")
        start, stop, _ = key.indices(self.n)
        stop = max(start, stop)
        if start == stop:
            return self.xp.zeros((0, self.T, self.d), dtype=self.dtype)
        first, last = start // self.chunk, (stop - 1) // self.chunk
        parts = self.blocks(range(first, last + 1))
        X = parts[0] if len(parts) == 1 else self.xp.concatenate(parts)
        offset = first * self.chunk
        return X[start - offset:stop - offset]

    def window(self, start: int, stop: int) -> "TokenStream":
        """Samples ``start`` to ``stop`` as a stream of their own: the same draws, read from 0.

        ``start`` must be a multiple of ``chunk`` (a window is a run of whole chunks).
        """
        start = v.integer("start", start, minimum=0)
        stop = v.integer("stop", stop, minimum=start + 1)
        if start % self.chunk or stop > self.n:
            raise ValueError(f"a window of the stream starts at a multiple of its chunk ({self.chunk}) and "
                             f"ends by n={self.n}, got start={start}, stop={stop}")
        return replace(self, n=stop - start, first=self.first + start // self.chunk)

    def __reduce__(self):
        """Pickled with its array module by name (a shard of it goes to another process)."""
        state = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "xp"}
        return _unpickle_stream, (state, backend_name(self.xp))

    def materialise(self):
        """All ``n`` samples as one array: the stored data set of the same draws."""
        return self[0:self.n]


def draw_threads() -> int:
    """Host threads that draw the chunks of one read of a :class:`TokenStream`: ``OMP_NUM_THREADS``
    when set (the sweeps' workers set it to their BLAS threads), else the machine's cores."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, int(given)) if given.isdigit() else (os.cpu_count() or 1)


def _unpickle_stream(state: dict, backend: str) -> TokenStream:
    """The :class:`TokenStream` of :meth:`TokenStream.__reduce__`."""
    return TokenStream(**state, xp=module_named(backend))


def token_stream(n: int, T: int, d: int, rng, tokens=None, *, xp=None, dtype=np.float64) -> TokenStream:
    """A :class:`TokenStream` of ``n`` samples keyed by two 63-bit words drawn from ``rng``, read as
    arrays of the module ``xp`` (default: numpy).

    ``rng`` is the Generator of the data set (:func:`aimlib._validate.generator`): the key is
    its next draw, so a seed gives the same tokens on every backend and every read.
    """
    law = token_law(tokens)
    n, T, d = v.integer("n", n, minimum=1), v.integer("T", T, minimum=2), v.integer("d", d, minimum=1)
    key = tuple(int(x) for x in v.generator(rng).integers(0, 2**63, size=2))
    return TokenStream(law=law, n=n, T=T, d=d, key=key, dtype=np.dtype(dtype), xp=xp, root=law.covariance_root(d))
