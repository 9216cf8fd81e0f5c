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
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from . import _validate as v

__all__ = ["LAWS", "TokenLaw", "token_law", "toeplitz_covariance", "covariance_sqrt"]

#: law -> its parameters with their defaults
LAWS = {"gaussian": {}, "rademacher": {}, "uniform": {}, "sparse": {"p": 0.1},
        "student-t": {"nu": 5.0}, "correlated": {"c": None, "cov": None}}


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
    """A validated token law: ``name`` and its parameters as sorted ``(key, value)`` pairs."""

    name: str = "gaussian"
    params: tuple = ()

    @property
    def is_gaussian(self) -> bool:
        """True for the white Gaussian law of the solvable model."""
        return self.name == "gaussian"

    def to_dict(self) -> dict:
        """The mapping ``{"name": ..., **params}`` (``cov`` as nested lists)."""
        p = {k: (x.tolist() if isinstance(x, np.ndarray) else x) for k, x in self.params}
        return {"name": self.name, **p}

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

    def sample(self, rng: np.random.Generator, shape: tuple) -> np.ndarray:
        """Float64 draws of shape ``shape`` (last axis ``d``) from ``rng``.

        ``gaussian`` draws exactly ``rng.standard_normal(shape)``.
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
        root = covariance_sqrt(self.covariance(shape[-1]))
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

    Raises ``ValueError`` naming ``tokens``: for text that is neither, for JSON
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

    A mapping holds ``name`` and the law's parameters (:data:`LAWS`); omitted
    parameters take their defaults.  ``correlated`` needs exactly one of ``c``
    and ``cov``.  Errors name the parameter and its range.
    """
    if tokens is None or isinstance(tokens, TokenLaw):
        return tokens or TokenLaw()
    if isinstance(tokens, str):
        tokens = {"name": tokens}
    if not isinstance(tokens, dict):
        raise TypeError(f"tokens must be a law name, a mapping or None, got {type(tokens).__name__}")
    spec = dict(tokens)
    name = v.choice("tokens.name", spec.pop("name", None), tuple(LAWS))
    for k in spec:
        if k not in LAWS[name]:
            allowed = ", ".join(LAWS[name]) or "none"
            raise ValueError(f"tokens.{k} is not a parameter of law {name!r} (allowed: {allowed})")
    if name == "correlated" and (("c" in spec) == ("cov" in spec)):
        raise ValueError("tokens of law 'correlated' need exactly one of tokens.c and tokens.cov")
    params = {k: x for k, x in LAWS[name].items() if x is not None}
    params.update({k: _param(name, k, x) for k, x in spec.items()})
    return TokenLaw(name, tuple(sorted(params.items())))
