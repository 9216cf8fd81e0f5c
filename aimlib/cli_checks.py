r"""The input rules of the command line (:mod:`aimlib.cli`), applied before any work starts.

* every option may be given once (:class:`Parser` makes each one :class:`Once`, flags and
  choices included): a repeat is refused, never "the last one wins";
* a number is finite and in its option's range (:class:`Number`, :func:`check_numbers`);
  ``-inf`` and ``-1e5`` are read as values, so they are refused with the range too;
* the rules that need several options (:func:`check_channel_options`: the ``--T`` a channel's Bayes
  side supports, ``--noise`` of the hardmax, ``--rho 0``; :func:`check_samples`: ``amp``'s
  ``n = round(alpha d^2) >= 1``; :func:`check_gd`: the arrays of ``gd`` with its ``--rank``);
* ``gd``'s options reach :func:`aimlib.gd.run_gd` by :func:`gd_options`, and the advice of its
  failures names them (:func:`gd_advice`: ``lower --lr``, not the keyword ``lr``).

Every message is one line: the option as typed (``--rho``), its allowed range, and advice
that the command line can follow.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import re

from . import _validate as v
from ._lazy import LazyModule
from ._validate import RHO_RANGE
from .channels.deep_hardmax import check_residual
from .channels.registry import capabilities, make_channel, t_limit, threshold_limit
from .priors import TEACHER_FAMILIES
from .rmt.spectrum import teacher_width
from .tokens import parse_token_law

gd_memory = LazyModule("aimlib.gd.memory")   # loaded on first use: `se` never loads gd
gd_checks = LazyModule("aimlib.gd.checks")

__all__ = ["Parser", "Once", "OnceFlag", "Number", "check_numbers", "RANGES", "token_law_type",
           "check_channel_options", "check_gd", "check_samples", "gd_arguments", "gd_options", "gd_advice"]


class Once(argparse.Action):
    """Store an option's value, refusing a second occurrence (``--alpha 1 --alpha 2``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, "_given_" + self.dest, False):
            advice = (f"list every value after one {option_string}" if self.nargs in ("+", "*")
                      else f"give {option_string} once")
            parser.error(f"{option_string} given twice; {advice}")
        setattr(namespace, "_given_" + self.dest, True)
        setattr(namespace, self.dest, values)


class OnceFlag(Once):
    """A flag (``store_true``) that may be given once."""

    def __init__(self, option_strings, dest, default=False, required=False, help=None):
        super().__init__(option_strings, dest, nargs=0, const=True, default=default, required=required,
                         help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, True, option_string)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` with one rule for every option of every command.

    Errors are one line on stderr with exit status 2; an option stored by
    value (the default action) or a ``store_true`` flag is given at most once;
    ``-inf``, ``-nan`` and ``-1e5`` are values, not options.  Sub-commands get
    the same class (``add_subparsers`` uses the parser's own class).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)

    def error(self, message):  # noqa: D401 - argparse API
        message = _RANGE_ERROR.sub(r"\1 must be", " ".join(str(message).split()))  # "--rho must be in ..."
        self.exit(2, f"{self.prog}: error: {message}\n")

    def add_argument(self, *args, **kwargs):
        if args and str(args[0])[:1] in self.prefix_chars:
            action = kwargs.get("action")
            if action in (None, "store"):
                kwargs["action"] = Once
            elif action == "store_true":
                kwargs["action"] = OnceFlag
        action = super().add_argument(*args, **kwargs)
        if isinstance(action.type, Number):   # its range: check_numbers, after parsing
            numbers = self._defaults.setdefault("_numbers", [])
            numbers.append(action)
        return action


_RANGE_ERROR = re.compile(r"^argument (--[\w-]+): must be")


def _g(x) -> str:
    return f"{x:g}"


#: the range of ``--rho`` as messages state it, ``[0.0001, 10000]``
_RHO_TEXT = f"[{_g(RHO_RANGE[0])}, {_g(RHO_RANGE[1])}]"


def _rho_floor(rho, note: str = "") -> None:
    """Refuse a width ratio below ``RHO_RANGE[0]`` (the number type lets 0 through for one command)."""
    if any(r < RHO_RANGE[0] for r in rho):
        raise ValueError(f"--rho must be in {_RHO_TEXT}, got {' '.join(_g(r) for r in rho)}{note}")


class Number:
    """An argparse ``type``: a number (``kind=int``: an integer), and its range, checked by :func:`check_numbers`.

    Text that is no number is refused while parsing (exit status 2, argparse's
    ``SystemExit``); a value that is not finite or out of range by
    :func:`check_numbers`, whose error states the range: ``--rho must be in
    [0.0001, 10000], got inf``.
    """

    def __init__(self, low=None, high=None, *, low_open: bool = False, high_open: bool = False, kind=float,
                 shown: str | None = None):
        self.low, self.high, self.low_open, self.high_open, self.kind = low, high, low_open, high_open, kind
        integer = kind is int
        if low is not None and high is not None:
            text = f"{'(' if low_open else '['}{_g(low)}, {_g(high)}{')' if high_open else ']'}"
            text = ("an integer in " if integer else "in ") + text
        elif low is not None:
            text = f"{'an integer ' if integer else 'a finite number '}{'>' if low_open else '>='} {_g(low)}"
        else:
            text = "an integer" if integer else "a finite number"
        self.text = shown or text
        self.__name__ = "integer" if integer else "number"

    def __call__(self, s: str):
        try:
            return self.kind(s)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {self.text}, got {s!r}") from None

    def check(self, option: str, x) -> None:
        lo, hi = self.low, self.high
        if not (math.isfinite(x) and not (lo is not None and (x < lo or (self.low_open and x == lo)))
                and not (hi is not None and (x > hi or (self.high_open and x == hi)))):
            raise ValueError(f"{option} must be {self.text}, got {x!r}")


number = Number


def check_numbers(args) -> None:
    """Every number given (or defaulted) is finite and in its option's range (:class:`Number`)."""
    for action in getattr(args, "_numbers", ()):
        value = getattr(args, action.dest, None)
        for x in value if isinstance(value, list) else [] if value is None else [value]:
            action.type.check(action.option_strings[-1], x)


#: option -> its type (finite numbers in the range the library supports at the command line)
RANGES = {
    "alpha_se": number(0),                              # alpha = 0: the prior's error
    "alpha": number(0, low_open=True),                  # a run needs n = alpha d^2 >= 1 samples
    "rho": number(0, RHO_RANGE[1], shown=f"in {_RHO_TEXT}"),  # 0 only for threshold --channel hardmax
    "beta": number(0, 1e30, low_open=True),             # aimlib.channels.softmax.BETA_MAX
    "noise": number(0, 1e6),                            # beyond, the labels carry nothing (SNR < 1e-6)
    "c": number(-100, 100),                             # deep-hardmax residual strength
    "T": number(2, kind=int),
    "layers": number(1, kind=int),
    "d": number(2, kind=int),
    "seed": number(0, kind=int),
    # se --cross iterated: at least ten batches of 100 draws; 2e6 draws hold about 2 GB (0.8 kB a draw, measured)
    "draws": number(1000, 2_000_000, kind=int, shown="an integer in [1000, 2000000]"),
    "positive_int": number(1, kind=int),                # --max-iter, --restarts, --steps, --rank
    "weight_decay": number(0, 1e6),
    "lr": number(0, low_open=True),                     # gd's step (aimlib.gd.optim.make_optimizer)
    "lr_decay": number(0, 1, low_open=True),            # aimlib.gd.schedule: a factor in (0, 1]
    "damping": number(0, 1, high_open=True),            # aimlib.amp.gamp_rie
    "tol": number(0, 1, low_open=True),
}

def token_law_type(text: str):
    """``--tokens`` by :func:`aimlib.tokens.parse_token_law`, its error message shown by argparse."""
    try:
        return parse_token_law(text)
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_channel_options(args, command: str) -> None:
    """The rules of ``--channel`` with ``--T``, ``--noise`` and ``--rho`` (``se``, ``threshold``, ``amp``),
    from what the channel declares (:func:`aimlib.channels.registry.capabilities`)."""
    ch, rho = args.channel, list(args.rho)
    cls = capabilities(ch)
    if args.heads is not None:
        _check_heads(ch, cls, args.heads)
    if len(cls.sectors) > 1 and args.teachers is not None:
        raise ValueError(f"--teachers {args.teachers}: the teachers of --channel {ch} are square, S = Q K^T/sqrt(r d) "
                         f"(untied key and query); --teachers names the tied families ({', '.join(TEACHER_FAMILIES)}): "
                         "give no --teachers")
    if command != "threshold" and not cls.bayes_side:
        raise ValueError(f"--channel {ch}: {t_limit(ch, args.T)}; {command} needs one")
    if not (command == "threshold" and cls.threshold == "weak"):
        _rho_floor(rho, " (--rho 0 only for the weak-recovery threshold: threshold --channel hardmax --rho 0)")
    if "layers" in cls.parameters:
        _check_deep(args, command, rho)
    if command == "threshold":
        _check_threshold(args, cls)
        return
    if limit := t_limit(ch, args.T, args.noise or 0.0):
        if args.noise and cls.noise_max_T == 0:
            raise ValueError(f"--noise {_g(args.noise)}: {limit} (or no --noise)")
        raise ValueError(f"--T: {limit}, got --T {args.T}")


def _check_heads(ch: str, cls, heads: int) -> None:
    """``--heads``: an option of the heads channels only, in the range their class takes."""
    if "heads" not in cls.parameters:
        raise ValueError(f"--heads is not an option of --channel {ch} (it takes "
                         f"{', '.join('--' + p for p in cls.parameters)})")
    try:
        make_channel(ch, heads=heads)
    except ValueError as exc:
        raise ValueError(f"--heads: {exc}, got --heads {heads}") from None


def _check_threshold(args, cls) -> None:
    """``threshold``: the onsets take no options, perfect recovery needs no label noise, and each
    threshold its range of ``T``."""
    ch = args.channel
    if cls.threshold is None or not cls.bayes_side:
        raise ValueError(f"--channel {ch}: {threshold_limit(ch, args.T)}")
    if cls.threshold == "onsets":
        given = [o for o in ("rho", "T", "teachers", "beta", "noise", "estimator")
                 if getattr(args, "_given_" + o, False)]
        if given:
            raise ValueError(f"--{given[0]}: threshold --channel {ch} prints each layer's rho -> 0 onset "
                             "in alpha_bar = alpha/rho (hardmax layers, T = 2, the Bayes estimator, no label "
                             "noise, the same for both teacher families); it takes no --rho, --T, --teachers, "
                             "--beta, --noise or --estimator")
        return
    if cls.threshold == "perfect" and args.noise:
        raise ValueError(f"--noise {_g(args.noise)}: there is no perfect recovery with label noise; "
                         "threshold needs --noise 0 (or no --noise)")
    if limit := threshold_limit(ch, args.T):
        raise ValueError(f"--T: {limit}, got --T {args.T}")


def _check_deep(args, command: str, rho) -> None:
    """``--channel deep-hardmax``: ``--layers`` 2 or 3, ``--c`` away from the collisions, ``--rho``
    within the tables, three layers with centred teachers only (not for ``threshold``)."""
    if args.layers not in (None, 2, 3):
        raise ValueError(f"--layers must be 2 or 3 for --channel deep-hardmax, got {args.layers}")
    if args.c is not None:
        try:
            check_residual(args.c, args.layers or 2)
        except ValueError as exc:
            raise ValueError(f"--c: {exc}") from None
    if any(r > 1e3 for r in rho):
        raise ValueError(f"--rho must be in [0.0001, 1000] for --channel deep-hardmax (its output function "
                         f"is tabulated for errors >= (1 + rho)/1001), got {' '.join(_g(r) for r in rho)}")
    if args.layers == 3 and command == "amp":
        raise ValueError("--layers 3: GAMP-RIE with one denoiser per layer cannot start on three hardmax layers "
                         "(at the uninformative start the outputs of layers 1 and 2 are proportional); se "
                         "gives its state evolution")
    if args.layers == 3 and command != "threshold" and args.teachers != "centred":   # None: wishart
        raise ValueError("--teachers: three deep-hardmax layers are implemented for centred teachers only "
                         "(--teachers centred)")


def check_samples(args) -> None:
    """``amp``: at least one sample, ``n = round(alpha d^2) >= 1`` (:func:`aimlib._validate.sample_count`)."""
    try:
        v.sample_count(args.alpha, args.d)
    except ValueError as exc:
        raise ValueError(f"--alpha {args.alpha:g} at --d {args.d}: {exc} (or raise --d)") from None


def check_gd(args) -> None:
    """``gd``: ``--rho``, and its arrays against the memory budget before anything is sampled (``--rank``
    counted, a default width following ``--d``)."""
    d, rho, itemsize = args.d, args.rho[0], 8 if args.dtype == "float64" else 4
    _rho_floor([rho])
    n = v.requested_samples(args.alpha, d)
    sizes = dict(restarts=args.restarts, n=n, d=d, T=args.T, **({} if args.rank is None else {"rank": args.rank}))
    memory_estimate = gd_memory.memory_estimate

    def need(restarts, n, d, T, rank=None):  # the default width follows d
        rank = rank or (d if args.student == "direct" else teacher_width(d, rho))
        return memory_estimate(n, T, d, rank, restarts, n_test=min(n, 2000), itemsize=itemsize)

    v.check_memory(need, sizes, v.MEMORY_MB, via={"n": ("alpha", args.alpha, d * d)})


def gd_arguments(p) -> None:
    """The options of ``gd`` besides those of every run (:func:`aimlib.cli._run_arguments`)."""
    p.add_argument("--beta", type=RANGES["beta"], default=1.0, action=Once,
                   help="softmax inverse temperature in (0, 1e30] (default: 1)")
    p.add_argument("--restarts", type=RANGES["positive_int"], default=1, help="students averaged (default: 1)")
    p.add_argument("--steps", type=RANGES["positive_int"], default=1000, help="Adam steps (default: 1000)")
    p.add_argument("--lr", type=RANGES["lr"], default=None,
                   help="Adam's step, a finite number > 0 (default: 0.1, times sqrt(d/k) for a factorised student "
                        "wider than d: 0.02 at --rho 25; aimlib.gd.optim.default_lr)")
    p.add_argument("--lr-decay-at", type=RANGES["positive_int"], default=None,
                   help="multiply the step by --lr-decay before this step, in [1, --steps) (default: a fixed step)")
    p.add_argument("--lr-decay", type=RANGES["lr_decay"], default=None,
                   help="the factor of --lr-decay-at, in (0, 1] (default: 0.1)")
    p.add_argument("--keep", choices=["last", "lowest"], default=None,
                   help="each student's last weights, or those of its lowest training loss (default: last)")
    p.add_argument("--student", choices=["factorised", "direct"], default="factorised",
                   help="W W^T / sqrt(k d) of width --rank, or S_hat trained entrywise (default: factorised)")
    p.add_argument("--rank", type=RANGES["positive_int"], default=None,
                   help="width k of the factorised student (default: the teacher's, rho d)")
    p.add_argument("--weight-decay", type=RANGES["weight_decay"], default=0.0,
                   help="lambda in [0, 1e6]: adds (lambda/2) Tr S_hat (factorised) or (lambda/2) ||S_hat||_F^2 "
                        "(direct) to the loss (default: 0)")
    p.add_argument("--on-max-iter", choices=["raise", "warn", "return"], default="return",
                   help="if --steps end before the tolerance: print the row (default: the steps are a "
                        "budget) or fail with exit status 1 ('raise'); divergence or no progress always fails")


#: the options of ``gd`` that :func:`aimlib.gd.run_gd` takes as they are (left out when not given: ``None``)
_GD_OPTIONS = ("restarts", "backend", "dtype", "beta", "steps", "student", "weight_decay", "tokens", "teachers",
               "on_max_iter", "rank", "lr", "lr_decay_at", "lr_decay", "keep")


def gd_options(args) -> dict:
    """The keyword arguments of :func:`aimlib.gd.run_gd` from the options of ``gd``."""
    return {k: getattr(args, k) for k in _GD_OPTIONS if getattr(args, k) is not None}


@contextlib.contextmanager
def gd_advice(args):
    """Within: the advice of gd's failures names the options of this command (``lower --lr``), and only
    those (:data:`aimlib.gd.checks.ADVICE_NAMES`; ``tol``, no option, is left out)."""
    names = gd_checks.ADVICE_NAMES
    token = names.set({k: "--" + k.replace("_", "-") for k in vars(args) if not k.startswith("_") and k != "command"})
    try:
        yield
    finally:
        names.reset(token)
