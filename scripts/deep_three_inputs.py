"""Three-layer GAMP-RIE along its run: does each prior step do what its inputs allow?

Writes ``book/data/deep_three_inputs.csv``, one row per iteration of each run: the runs of
``scripts/deep_three_trace.py`` (same data sets, start ``eps`` and damping 0.5), for exactly ``--iterations``
iterations (``gamp_rie``'s ``stop='prediction'`` at ``tol = 1e-12``, which a moving run does not meet).  After
iteration ``t``, per layer ``l``: ``error_l`` of the damped estimate (the trace's column, which ties the two
files); the channel step's noise ``delta_l`` (``Delta_l``) and noise ratio ``noise_l = ||R_l - S_l||_F^2 / (d
Delta_l)``; the part of ``R_l - S_l`` along the layer's own centred teacher ``C_l``, ``self_l = Tr((R_l - S_l) C_l)
/ Tr(C_l^2)`` (zero when ``R_l = S_l + sqrt(Delta_l) Z_l``, up to a fluctuation); ``pred_l``, the prior's error at
``Delta_l`` (:meth:`~aimlib.priors.base.Prior.mmse`, the prediction); and the error ``(1/d) ||f_l(M) - S_l||_F^2``
of the layer's denoiser ``f_l``, tuned to ``Delta_l``, on a ladder of inputs ``M``, each keeping more of ``R_l``:
``law_l`` on ``S_l + sqrt(Delta_l) Z`` (the state evolution's law at this ``d``), ``sized_l`` on ``S_l +
sqrt(noise_l Delta_l) Z`` (the noise's size), ``synth_l`` on ``S_l + self_l C_l + sigma_l Z`` with ``sigma_l^2 =
(1/d) ||N_l||_F^2`` the size of the rest ``N_l = R_l - S_l - self_l C_l`` (the teacher's scale), ``rotated_l`` on
``S_l + self_l C_l + O N_l O^T`` (the rest's spectrum, its eigenvectors' alignment with the teachers lost), and
``fresh_l`` on ``R_l`` itself (the denoiser's output before damping).  ``Z`` is one GOE draw
(:func:`aimlib.rmt.spectrum.sample_goe`) shared by the first three rungs, so that their differences are not swamped by
its scatter, and ``O`` one Haar orthogonal matrix, both from ``default_rng([seed, t, l - 1])`` (book, chapter
"Three layers").  About 12 seconds per run at ``d = 100``, a minute at ``d = 200``
and four at ``d = 300`` on one core::

    python scripts/deep_three_inputs.py [--out book/data/deep_three_inputs.csv]
        [--d 100 200 ...] [--seeds 0 1 2 ...] [--eps 0.1] [--iterations 40]
"""
from __future__ import annotations

import contextlib
import sys

import numpy as np
from scipy.stats import ortho_group

from aimlib.amp import gamp_rie
from aimlib.backend import to_host
from aimlib.errors import ConvergenceError
from aimlib.model import matrix_overlap
from aimlib.rmt.spectrum import sample_goe
from deep_three_gamp import problem
from _rows import command_line, data_parser, write_rows

COMMAND = "python scripts/deep_three_inputs.py"
ALPHA = 1.0
PER_LAYER = ["error", "delta", "noise", "self", "pred", "law", "sized", "synth", "rotated", "fresh"]
COLUMNS = ["alpha", "d", "seed", "t"] + [f"{x}_{k}" for x in PER_LAYER for k in (1, 2, 3)]


def denoised_error(prior, M, S, delta) -> float:
    """``(1/d) ||f(M) - S||_F^2``: the error of ``prior``'s denoiser, tuned to ``delta``, on the input ``M``."""
    out = to_host(prior.denoise(M, delta)[0])
    return matrix_overlap(out - S, out - S)


def layer_row(prior, R, S, C, delta, ratio, rng) -> dict:
    """One layer's columns after an iteration (module docstring): its input ``R`` with noise ``delta`` and noise
    ratio ``ratio``, its teacher ``S``, centred teacher ``C``, and ``rng`` for the GOE of the built inputs (one
    draw, shared by ``law``, ``sized`` and ``synth``) and the rotation."""
    R, dl = to_host(R), tuple(float(x) for x in np.atleast_1d(delta))
    scale = matrix_overlap(R - S, C) / matrix_overlap(C, C)
    rest = R - S - scale * C                                 # the noise beside the teacher's part
    Z, O = sample_goe(S.shape[0], rng), ortho_group.rvs(S.shape[0], random_state=rng)
    built = {"law": S + np.sqrt(dl[0]) * Z, "sized": S + np.sqrt(ratio * dl[0]) * Z,
             "synth": S + scale * C + np.sqrt(matrix_overlap(rest, rest)) * Z,
             "rotated": S + scale * C + O @ rest @ O.T}
    return {"delta": dl[0], "noise": ratio, "self": scale, "pred": prior.mmse(dl[0]),
            **{name: denoised_error(prior, M, S, dl) for name, M in built.items()},
            "fresh": denoised_error(prior, R, S, dl)}


def run(d: int, seed: int, eps: float, iterations: int) -> list[dict]:
    """The rows of one run at ``alpha = 1``: ``iterations`` iterations, every one recorded."""
    ch, data, S, centred, init, init_m = problem(ALPHA, d, seed, eps)
    rows = []

    def record(state):
        row = {"alpha": ALPHA, "d": d, "seed": seed, "t": state.t}
        for k, prior in enumerate(data.priors):
            E = to_host(state.S_hat[k]) - S[k]
            one = layer_row(prior, state.R[k], S[k], centred[k], state.delta[k], state.noise_ratio[k],
                            np.random.default_rng([seed, state.t, k]))
            row |= {f"{x}_{k + 1}": val for x, val in (one | {"error": matrix_overlap(E, E)}).items()}
        rows.append(row)

    follow(ch, data, S, init, init_m, iterations, record)
    return rows


def follow(ch, data, S, init, init_m, iterations: int, callback, priors=None) -> None:
    """GAMP-RIE on ``data`` from the informative start for exactly ``iterations`` iterations, ``callback`` after each
    (``stop='prediction'`` at ``tol = 1e-12``, which a moving run does not meet; a last state that the final check
    refuses is kept by the callback); ``priors`` in place of the data set's own."""
    with contextlib.suppress(ConvergenceError):
        gamp_rie(data.X, data.y, ch, data.priors if priors is None else priors, S=S, init=init, init_m=init_m,
                 on_max_iter="return", callback=callback, stop="prediction", tol=1e-12, max_iter=iterations)


def runs_parser(doc: str, name: str):
    """The command line of a script that follows these runs: ``--out`` (default ``book/data/<name>``), ``--d``,
    ``--seeds``, ``--eps`` and ``--iterations``."""
    p = data_parser(doc, name)
    p.add_argument("--d", type=int, nargs="+", default=[100, 200])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eps", type=float, default=0.1)
    p.add_argument("--iterations", type=int, default=40)
    return p


def write_runs(script, argv=None, options=()) -> int:
    """``script``'s ``main``: its ``run`` over ``--d`` and ``--seeds``, written with its ``COLUMNS``, made-by line;
    the script's own ``options`` (names of its command line's values) go to ``run`` as keywords."""
    args = script.parser().parse_args(argv)
    extra = {name: getattr(args, name) for name in options}
    rows = (r for d in args.d for s in args.seeds for r in script.run(d, s, args.eps, args.iterations, **extra))
    return write_rows(args.out, script.command(args), script.COLUMNS, rows)


def made_by(command: str, parser, args, options=()) -> str:
    """The ``# made by:`` command of such a script: ``command`` and the options that differ from their defaults,
    the script's own ``options`` after the runs' ones."""
    return command_line(command, parser(), args, ("d", "seeds", "eps", "iterations", "out") + tuple(options))


def parser():
    """The command line (:func:`runs_parser`)."""
    return runs_parser(__doc__, "deep_three_inputs.csv")


def main(argv=None) -> int:
    return write_runs(sys.modules[__name__], argv)


def command(args) -> str:
    """The ``# made by:`` command (:func:`made_by`)."""
    return made_by(COMMAND, parser, args)


if __name__ == "__main__":
    raise SystemExit(main())
