"""Runs and their stable keys.

A run's key is the first 16 hex digits of the SHA-256 of its canonical
parameters: JSON with sorted keys, floats rounded to 12 significant digits
(:func:`canon_float`), only the parameters the method uses (``beta`` for the
softmax channel, ``c`` for the two-layer channel, ``d`` and ``seed`` for the
finite-``d`` methods; ``rho`` a list of one width per teacher for a channel of
several indices; ``tokens`` only for a token law other than ``gaussian``) and the
method's options with the sweep's defaults filled in.  The key does not
depend on a spec's layout, on the order of its lists, on ``backend`` or on
where the run executes.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Mapping

from ..channels import make_channel
from ..channels.registry import PARAMETERS

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=True)


def canon_float(x: float) -> float:
    """Round to 12 significant digits, so ``0.1 + 0.2`` and ``0.3`` name the same run."""
    return float(f"{x:.12g}") if math.isfinite(x) else x


def make_run_channel(channel: str, **params):
    """The channel ``channel`` built from those of ``params`` it takes (the others are ignored)."""
    return make_channel(channel, **{k: x for k, x in params.items() if k in PARAMETERS[channel]})


def run_key(params: Mapping) -> str:
    """The run key: 16 hex digits of SHA-256 of the canonical JSON of ``params``."""
    return hashlib.sha256(_ENCODER.encode(params).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Run:
    """One point of a sweep.  ``key`` is computed from :meth:`params` (never from ``backend``)."""

    method: str
    channel: str
    T: int
    rho: float | tuple
    alpha: float
    beta: float | None = None
    noise: float = 0.0
    c: float | None = None
    d: int | None = None
    seed: int | None = None
    tokens: tuple | None = None
    teachers: str | None = None
    options: tuple = ()
    backend: str | None = None
    key: str = field(init=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "key", run_key(self.params()))

    @property
    def alpha_bar(self) -> float | None:
        """``k alpha`` where the channel has an ``alpha_bar`` (``k``: :meth:`aimlib.channels.base.Channel.linear_k`)."""
        k = make_run_channel(self.channel, noise=self.noise).linear_k(self.T)
        return None if k is None else canon_float(k * self.alpha)

    def params(self) -> dict:
        """The canonical parameters that define the run (and its key)."""
        p = {"method": self.method, "channel": self.channel, "T": self.T, "rho": self.rho,
             "alpha": self.alpha, "noise": self.noise, "options": dict(self.options)}
        if "beta" in PARAMETERS[self.channel]:
            p["beta"] = self.beta
        if self.c is not None:
            p["c"] = self.c
        if self.method != "se":
            p["d"] = self.d
            p["seed"] = self.seed
        if self.tokens is not None:
            p["tokens"] = dict(self.tokens)
        if self.teachers is not None:
            p["teachers"] = self.teachers
        return p
