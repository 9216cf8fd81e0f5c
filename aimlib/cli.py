r"""Command-line interface: ``python -m aimlib <command> ...``.

Commands
--------
``se``
    State-evolution fixed points, CSV ``alpha,mmse,q`` on stdout::

        python -m aimlib se --channel softmax --T 2 --rho 0.5 --alpha 0.05 0.1

    Where the layers' output has cross terms (two deep-hardmax layers of Wishart teachers, three
    layers) the errors are GAMP-RIE's separable state evolution, followed by the oracle's (two layers)
    and the cross overlap of layers 1 and 2: ``--cross first-order`` (``q_12``) or ``iterated`` (also
    ``mmse_1_cross, mmse_2_cross, q_12_cross``, by Monte Carlo, ``--draws``, ``--seed``; the default for
    two layers), :mod:`aimlib.cli_deep`.

``threshold``
    The perfect-recovery ``alpha_PR`` of the softmax/linear channels, the hardmax
    weak-recovery threshold in ``alpha/rho`` (``--rho 0``), the ``rho -> 0`` onsets of
    the deep-hardmax layers (rows ``layer,alpha_bar``), or with ``--estimator
    min-trace`` that of minimum-trace recovery (:mod:`aimlib.convex`)::

        python -m aimlib threshold --channel softmax --T 2 --rho 0.5

``amp``
    One GAMP-RIE run on sampled data (``--tokens-storage regenerate``: no tokens held, :mod:`aimlib.tokens`),
    CSV ``alpha,d,seed,mmse,iterations,seconds``::

        python -m aimlib amp --channel softmax --T 2 --rho 0.5 --alpha 0.1 --d 200 --seed 0

    ``--scheduler local|tls://host:port [--shards K]`` shards the samples over Dask
    workers (:mod:`aimlib.amp.shards`); a scheduler at an address only over TLS, with the
    credentials in Dask's configuration (:mod:`aimlib.cluster`).

``gd``
    Gradient descent (Adam, step ``--lr``) from ``--restarts`` random initialisations on the same data, CSV
    ``alpha,d,seed,restarts,mmse_single,mmse_averaged,seconds,lr,mmse_data_free,worse_than_data_free``
    (``mmse_single`` is the mean error of the single students; ``worse_than_data_free`` is 1, with a
    warning on stderr, where it is above ``mmse_data_free``, the error of the data-free estimate)::

        python -m aimlib gd --T 2 --rho 0.5 --alpha 0.1 --d 100 --seed 0 --restarts 8

Both take ``--backend numpy|cupy``, ``--dtype float32|float64``, ``--tokens LAW`` (:mod:`aimlib.tokens`).

``sweep``
    A grid of se/amp/gd/gd_avg runs from a YAML spec (:mod:`aimlib.sweep`; the command: :mod:`aimlib.cli_sweep`),
    computed in parallel and appended to a CSV, one row per run; rows already
    there are reused, so an interrupted sweep resumes where it stopped::

        python -m aimlib sweep sweeps/softmax_se.yaml --out sweeps/softmax_se.csv \
            [--scheduler local|tls://host:port] [--workers N] [--no-progress] [--dry-run]

    A bad spec exits with status 2 and one line naming the field; runs that
    fail (no row written) make the exit status 1.

Exit status (every command): 0 a result, 1 a solver failure (no convergence
within the iteration cap, divergence, an inconsistent final state; the rule of
:mod:`aimlib.errors`), 2 bad input (one line on stderr naming the parameter:
argparse errors, the library's ``ValueError``/``TypeError`` and a missing optional
package, named with its install command, alike).  An option that a command or
channel does not use is refused, not ignored; so are a repeated option and a
number that is not finite or out of its range, before any work starts
(:mod:`aimlib.cli_checks`).

``--channel`` is any name of the registry (:data:`aimlib.channels.registry.CHANNELS`): ``softmax``, ``hardmax``,
``linear``, ``deep-hardmax`` (``--layers``, ``--c``), ``untied-softmax`` (untied key and query: square teachers,
noiseless; ``se`` prints ``alpha,mmse,q,mmse_A,mmse_B``, the state evolution of GAMP with the equalised denoiser,
and ``threshold`` the counting threshold), ``heads`` (``--heads`` averaged softmax heads: no Bayes side, so
``se``, ``amp`` and ``threshold`` refuse it, naming why) and ``heads-concatenated`` (``--heads`` heads side by side,
one ``--rho`` per head).  What a channel refuses (a ``--T``, ``--noise``, ``--teachers``) comes from what it
declares (:mod:`aimlib.channels.registry`), with the option and its allowed range.

``--teachers wishart|centred`` chooses the tied teachers' family (:func:`aimlib.priors.make_priors`; default
wishart; square channels take none).
A new command is an entry of :data:`COMMANDS` (:func:`register_command`); channels come from
:func:`aimlib.channels.make_channel`, so a registered channel with a Bayes side works in ``se`` and ``amp``.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

import numpy as np

import aimlib  # amp, gd, sweep and convex load on first use (aimlib.__getattr__): `se` never imports them

from . import _validate, state_evolution as se
from ._optional import MissingDependency
from .channels import deep_hardmax, make_channel
from .channels.registry import CHANNELS, capabilities
from .cli_checks import (RANGES, Once, Parser, check_channel_options, check_gd, check_numbers, check_samples,
                         gd_advice, gd_arguments, gd_options, token_law_type)
from .cli_deep import cross_arguments, cross_mode, deep_columns
from .cli_output import columns, fmt, print_gd_row, print_row, print_table, tabulate_with_progress, values
from .cli_sweep import sweep_arguments, sweep_run
from .cluster import TLS_HELP, check_scheduler
from .errors import ConvergenceError
from .iteration import STOPS
from .priors import TEACHER_FAMILIES, make_priors
from .tokens import STORAGES, token_law

__all__ = ["main", "build_parser", "register_command", "COMMANDS"]
_Parser, _Once = Parser, Once  # one line per error, every option at most once (aimlib.cli_checks)

class UsageError(ValueError):
    """A bad combination of command-line arguments (exit status 2)."""


# --- se and threshold -------------------------------------------------------

def _add_channel(p):
    p.add_argument("--channel", default="softmax", choices=list(CHANNELS),
                   help="output channel (default: softmax); deep-hardmax: hardmax attention layers (--layers); "
                        "untied-softmax: untied key and query (square S = Q K^T/sqrt(r d), noiseless; se gives "
                        "the state evolution of GAMP with the equalised denoiser, the upper end of the bracket of "
                        "the exact one, and its split over the symmetric and antisymmetric parts, mmse_A and "
                        "mmse_B; threshold the counting one); heads: "
                        "--heads softmax heads averaged (no Bayes side: refused by se and amp); "
                        "heads-concatenated: side by side (one --rho per head)")
    p.add_argument("--beta", type=RANGES["beta"], default=None, action=_Once,
                   help="softmax inverse temperature in (0, 1e30] (softmax only; default: 1)")
    p.add_argument("--noise", type=RANGES["noise"], default=None, action=_Once,
                   help="label-noise variance Delta_out in [0, 1e6] (default: 0)")
    p.add_argument("--c", type=RANGES["c"], default=None, action=_Once,
                   help="residual strength of the deep-hardmax channel, in [-100, 100] (default: 0.5)")
    p.add_argument("--layers", type=RANGES["layers"], default=None, action=_Once,
                   help="attention layers (index matrices per sample); 2 or 3 for deep-hardmax "
                        "(default 2), else must match the channel")
    p.add_argument("--heads", type=RANGES["positive_int"], default=None, action=_Once,
                   help="softmax heads, index matrices per sample, of --channel heads (>= 1) or "
                        "heads-concatenated (>= 2) (default: 2)")


def _add_rho(p):
    p.add_argument("--rho", type=RANGES["rho"], nargs="+", default=[0.5], action=_Once,
                   help="width ratio rho = r/d in [1e-4, 1e4], one per layer (default: 0.5)")
    p.add_argument("--teachers", choices=list(TEACHER_FAMILIES), default=None, action=_Once,
                   help="tied teachers: wishart S = W W^T/sqrt(r d) (default) or centred S - sqrt(rho) I "
                        "(untied-softmax: square S = Q K^T/sqrt(r d), no --teachers); "
                        "the state evolution of two deep-hardmax layers is exact for centred teachers; for "
                        "wishart ones (their layers share the index of sqrt(rho) I), and for three layers, "
                        "se prints the separable state evolution of GAMP-RIE with one denoiser per layer "
                        "(mmse_l; not established as a bound on the Bayes error), for two layers also the "
                        "oracle given the other (oracle_l, a lower bound), and the cross overlap of layers 1 "
                        "and 2 that the layers' correlated noises create, which mmse_l leaves out (--cross)")


def _add_common(p):
    _add_channel(p)
    p.add_argument("--T", type=RANGES["T"], default=2, action=_Once, help="sequence length T >= 2 (default: 2)")
    _add_rho(p)


def _channel(args):
    """The channel of ``--channel`` and its options, with ``args.rho`` checked against its layers."""
    check_channel_options(args, args.command)
    layers = args.layers if "layers" in capabilities(args.channel).parameters else None
    ch = make_channel(args.channel, beta=args.beta, noise=args.noise, c=args.c, layers=layers, heads=args.heads)
    L = ch.n_indices
    if args.layers is not None and args.layers != L:
        raise UsageError(f"--layers must be {L} for --channel {args.channel}, got {args.layers}")
    if len(args.rho) != L:
        raise UsageError(f"--rho must hold {L} width ratio{'s' if L > 1 else ''} (one per index matrix: layer "
                         f"or head) for --channel {args.channel}, got {len(args.rho)}")
    if ch.tabulated and args.command == "se":
        tabulate_with_progress(ch, shared=args.teachers in (None, "wishart"))
    return ch


def _rho(args, ch):
    return args.rho[0] if ch.n_indices == 1 else tuple(args.rho)


def _priors(args, ch):
    """The teachers' priors: ``--rho`` in the family ``--teachers`` (:func:`aimlib.priors.make_priors`)."""
    priors = make_priors(ch, args.rho, args.teachers)
    return priors[0] if len(priors) == 1 else priors


def _se_arguments(p):
    _add_common(p)
    p.add_argument("--alpha", type=RANGES["alpha_se"], nargs="+", required=True, action=_Once,
                   help="sample complexities alpha = n/d^2 >= 0")
    p.add_argument("--method", default="auto", choices=["auto", "closed", "iterate"],
                   help="closed form (noiseless softmax/linear) or SE iteration (default: auto)")
    cross_arguments(p, RANGES["draws"], RANGES["seed"])


def _se_run(args) -> int:
    """CSV ``alpha,mmse,q`` per layer; where the layers have cross terms the ``mmse`` columns are
    GAMP-RIE's separable state evolution, and the cross overlap of layers 1 and 2 follows, with the
    oracle's errors for two layers (:func:`aimlib.cli_deep.deep_columns`, ``--cross``)."""
    ch = _channel(args)
    priors = _priors(args, ch)
    mode = cross_mode(args, ch, priors if ch.n_indices > 1 else (priors,))   # refusals before any work
    res = se.curve(args.alpha, ch, T=args.T, rho=priors, method=args.method)
    if ch.square:      # one index matrix of two sectors: its error, overlap and the error of each part
        print_table(["alpha", "mmse", "q"] + [f"mmse_{s}" for s in ch.sectors],
                    [[a, sum(m), sum(q), *m] for a, m, q in zip(res.alpha, res.mmse, res.q)])
        return 0
    head = ["alpha"] + columns("mmse", ch.n_indices) + columns("q", ch.n_indices)
    rows = [[a, *values(m), *values(q)] for a, m, q in zip(res.alpha, res.mmse, res.q)]
    if mode is not None:
        more, extra = deep_columns(args, ch, priors, res, mode)
        head, rows = head + more, [row + x for row, x in zip(rows, extra)]
    print_table(head, rows)
    return 0


def _deep_onsets(args) -> int:
    """Rows ``layer,alpha_bar``: where each layer's error leaves 1 as ``rho -> 0`` at ``alpha_bar = alpha/rho``
    (:func:`aimlib.channels.deep_hardmax.limit_thresholds`; the same for both teacher families)."""
    check_channel_options(args, "threshold")
    ch = make_channel(args.channel, c=args.c, layers=args.layers)
    tabulate_with_progress(ch, shared=False)
    onsets = deep_hardmax.limit_thresholds(ch.c, layers=ch.n_indices)
    print_table(["layer", "alpha_bar"], [[ell + 1, a] for ell, a in enumerate(onsets)])
    return 0


def _threshold_arguments(p):
    _add_common(p)
    p.add_argument("--estimator", choices=["bayes", "min-trace"], default="bayes", action=_Once,
                   help="bayes: the Bayes-optimal threshold (default); min-trace: the convex "
                        "route's, minimum-trace recovery (noiseless softmax only)")


def _threshold_run(args) -> int:
    """Perfect recovery (noiseless softmax/linear), the hardmax weak recovery at ``rho -> 0``, or
    the ``rho -> 0`` onsets of the deep-hardmax layers (:func:`_deep_onsets`)."""
    if capabilities(args.channel).threshold == "onsets":
        return _deep_onsets(args)
    ch = _channel(args)
    if args.estimator == "min-trace":
        if args.teachers not in (None, "wishart"):
            raise UsageError("--estimator min-trace recovers positive semi-definite (wishart) teachers only")
        if not ch.trainable or ch.linear_k(args.T) is None:
            raise UsageError(f"--estimator min-trace needs the noiseless softmax channel, got "
                             f"--channel {args.channel}{' with --noise' if ch.noise else ''}")
        print(fmt(aimlib.convex.min_trace_threshold(_rho(args, ch), args.T)))
        return 0
    if ch.threshold == "perfect":
        print(fmt(se.perfect_recovery_threshold(_priors(args, ch), args.T, ch)))
        return 0
    if args.rho != [0] or ch.noise != 0:
        raise UsageError(f"--channel {args.channel} has no perfect-recovery threshold; its weak-recovery "
                         "threshold (in alpha_bar = alpha/rho) is defined for --rho 0, no --noise")
    print(fmt(ch.weak_threshold(args.T)))
    return 0


# --- amp and gd: one finite-d run each, as one CSV row ----------------------

def _run_arguments(p):
    p.add_argument("--T", type=RANGES["T"], default=2, action=_Once, help="sequence length T (default: 2)")
    _add_rho(p)
    p.add_argument("--alpha", type=RANGES["alpha"], required=True, action=_Once,
                   help="sample complexity alpha = n/d^2 > 0")
    p.add_argument("--d", type=RANGES["d"], required=True, action=_Once, help="dimension d >= 2")
    p.add_argument("--seed", type=RANGES["seed"], default=0, action=_Once,
                   help="seed of the data and of the run (default: 0)")
    p.add_argument("--backend", choices=["numpy", "cupy"], default=None,
                   help="array backend (default: numpy unless AIMLIB_BACKEND=cupy)")
    p.add_argument("--dtype", choices=["float32", "float64"], default=None,
                   help="working precision (default: the method's own)")
    p.add_argument("--tokens", type=token_law_type, default=None, action=_Once,
                   help="law of the token entries: a name, or JSON with 'name' and parameters (default: gaussian)")


#: where the credentials of a TLS scheduler come from, for the help of --scheduler


def _amp_arguments(p):
    _run_arguments(p)
    _add_channel(p)
    p.add_argument("--max-iter", type=RANGES["positive_int"], default=300, help="iteration cap (default: 300)")
    p.add_argument("--on-max-iter", choices=["raise", "warn", "return"], default="raise",
                   help="at the cap: fail with exit status 1 (default), or print the unconverged row")
    p.add_argument("--damping", type=RANGES["damping"], default=None, help="damping in [0, 1) (default: GAMP's)")
    p.add_argument("--tol", type=RANGES["tol"], default=None, help="stopping tolerance in (0, 1] (default: GAMP's)")
    p.add_argument("--stop", choices=list(STOPS), default=None, action=_Once,
                   help="stopping rule (default 'window': the distance to the fixed point estimated over a "
                        "window, a cycle reported as oscillating, exit status 1; 'estimate': the step, the "
                        "former default)")
    p.add_argument("--tokens-storage", choices=list(STORAGES), default="store", action=_Once,
                   help="store (default) or regenerate: hold no tokens, redraw each chunk of samples in every pass")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="shard the samples over Dask workers: 'local' (a LocalCluster on this machine, TLS) "
                        f"or a scheduler at tls://host:port ({TLS_HELP}) (default: one process)")
    p.add_argument("--shards", type=RANGES["positive_int"], default=None,
                   help="runs of samples, one per worker by default (with --scheduler; 'local' starts this "
                        "many workers, default 2, at most the CPUs: each is a process of ~100 MB)")


def _amp_run(args) -> int:
    ch = _channel(args)
    check_samples(args)
    if args.shards is not None and args.scheduler is None:
        raise UsageError("--shards needs --scheduler ('local' or tls://host:port)")
    if args.scheduler is not None:
        check_scheduler("--scheduler", args.scheduler)
        aimlib.amp.shards.check_shards("--shards", args.shards, args.scheduler)
    given = {k: getattr(args, k) for k in ("damping", "tol", "stop", "scheduler", "shards")
             if getattr(args, k) is not None}
    tokens = token_law(args.tokens).with_storage(args.tokens_storage)
    row = aimlib.amp.run_amp(ch, args.T, _rho(args, ch), args.alpha, args.d, args.seed, backend=args.backend,
                             dtype=args.dtype, tokens=tokens, teachers=args.teachers, max_iter=args.max_iter,
                             on_max_iter=args.on_max_iter, **given)
    flagged = ["converged", "reason"] if args.on_max_iter != "raise" else []   # rows that may stop unconverged
    print_row(["alpha", "d", "seed", "mmse", "iterations", "seconds"] + flagged,
               dict(row, converged=int(row["converged"])))
    return 0


def _gd_arguments(p):
    _run_arguments(p)
    gd_arguments(p)   # the options of gd alone (aimlib.cli_checks)


def _gd_run(args) -> int:
    if len(args.rho) != 1:
        raise UsageError(f"--rho must hold one width ratio for gd, got {len(args.rho)}")
    check_gd(args)
    with gd_advice(args):   # a failure's advice names these options: lower --lr, not lr
        row = aimlib.gd.run_gd(args.T, args.rho[0], args.alpha, args.d, args.seed, **gd_options(args))
    print_gd_row(args, row)  # and a warning for a run worse than the data-free estimate
    return 0


# --- registry and entry point -----------------------------------------------

#: command -> (help, add_arguments(parser), run(args) -> exit status)
COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "se": ("state-evolution fixed points as CSV (alpha,mmse,q)", _se_arguments, _se_run),
    "threshold": ("perfect-recovery (or hardmax weak-recovery) threshold", _threshold_arguments,
                  _threshold_run),
    "amp": ("one GAMP-RIE run at finite d as CSV (alpha,d,seed,mmse,iterations,seconds)",
            _amp_arguments, _amp_run),
    "gd": ("gradient descent at finite d, single and averaged over restarts, as CSV",
           _gd_arguments, _gd_run),
    "sweep": ("a grid of se/amp/gd runs from a YAML spec, in parallel, cached in a CSV",
              sweep_arguments, sweep_run),
}


def register_command(name: str, help: str, add_arguments: Callable, run: Callable) -> None:
    """Add a sub-command (e.g. ``amp``, ``gd``, ``sweep``) to ``python -m aimlib``."""
    COMMANDS[name] = (help, add_arguments, run)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m aimlib",
                     description="Bayes-optimal learning of attention-indexed models.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (help_, add_arguments, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        add_arguments(p)
        p.set_defaults(_run=run)
    return parser


def main(argv=None) -> int:
    """Run the command line; return the exit status (0 a result, 1 a solver failure, 2 bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"python -m aimlib {args.command}"
    advice = _validate.MEMORY_ADVICE.set(None)  # the memory budget is no option of the command line
    try:
        check_numbers(args)
        with np.errstate(all="ignore"):  # no floating-point warnings on stderr: the results are checked
            return int(args._run(args) or 0)
    except (ValueError, TypeError, NotImplementedError, MissingDependency) as exc:
        msg = " ".join(str(exc).split())
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except ConvergenceError as exc:
        msg = " ".join(str(exc).split())
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 1
    finally:
        _validate.MEMORY_ADVICE.reset(advice)
