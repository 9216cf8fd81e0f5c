"""The published hardmax AMP, run as published and with the attention-indexed channel put back.

The AMP published with the paper (public repository
``FabrizioBoncoraglio/BO_ExtensiveRankAttention``, file ``AMP_hardmax.py``,
commit ``5f1b99c``) simulates, in its ``data_generation``, a channel that is
not the attention-indexed model (AIM).  It symmetrises the token products over
``(i, j)`` with a factor ``1/sqrt 2`` and then divides only the token-diagonal
entries ``a = b`` by ``sqrt 2`` again, so that its sensing matrices are
``X_aa = A_aa`` and ``X_12 = sqrt 2 A_12`` (``A_ab`` those of the AIM, ``book/model.md``)
and its off-diagonal index is ``h'_12 = sqrt 2 h_12``: ``Var h'_12 = Var h_11``
instead of ``Var h_11 / 2``, and the differences ``u_i = h_ii - h'_12`` that fix
the hardmax output have correlation ``1/2`` instead of ``1/3``.  Its ``gOut``
is written for that channel (standardisation ``sqrt(2V)``, correlation
``s_1 s_2 / 2``) and, like its state evolution, puts the joint density
``phi_2`` in place of the gradient of ``log Phi_2`` (``book/results.md``).

This script, given a checkout of that repository, applies two changes to the
text of ``AMP_hardmax.py`` and prints them as a unified diff:

(a) ``data_generation``: the outputs are computed from the AIM index,
    ``h_12 = h'_12 / sqrt 2`` (the sensing matrices ``X`` the AMP iterates with are
    left as published: they are an invertible reparametrisation of the AIM's,
    ``omega'_12 = sqrt 2 omega_12``, and every index keeps the AMP variance ``V``);
(b) ``gOut``: the gradient of ``log Phi_2`` for the AIM differences
    ``u_i = h_ii - h'_12 / sqrt 2``: ``kappa_i = s_i (omega_ii - omega'_12/sqrt 2) / sqrt(3V/2)``
    (``V/2`` is the book's ``V``, so this is the book's ``sqrt(3V)``), correlation
    ``tau = s_1 s_2 / 3``, ``A_i = phi(kappa_i) Phi((kappa_j - tau kappa_i)/sqrt(1-tau^2)) / Phi_2``
    and ``g'_12 = -(g_11 + g_22) / sqrt 2`` (the chain rule through ``omega'_12``).

Everything else of the published AMP (``AMP``, ``f_RIE``, ``F_RIE``, its
damping, tolerance and error metric) runs unchanged, from the published file.
It then runs ``AMP`` as published and as patched on the same data sets (same
seed: same tokens, teacher and initialisation; only the outputs ``y`` and
``gOut`` differ) and records the error the published code reports,
``error_eval = ||sqrt(d) hatS - S||_F^2 / d^2``.  Their teacher is
``S = W W^T / sqrt r``, ``sqrt d`` times the book's, and their ``hatS`` is on the
book's scale, so ``error_eval = ||hatS - S_book||_F^2 / d``: the book's ``E_S``, with
no conversion.  (It is the error of the iterate before the last update.)

Two execution aids, which change no number, are needed to run it on a small
machine, and the script checks both against the published code first:

* ``gOut`` (published and patched) is evaluated vectorised over the samples,
  with ``Phi_2`` from ``aimlib``'s exact bivariate normal CDF in place of
  SciPy's ``multivariate_normal.cdf``, a quasi-Monte Carlo estimate with
  absolute error ``1e-5`` called once per sample (about 0.4 ms each, so two
  hours per published run at ``d = 100``, ``alpha = 1``).  Agreement with the
  published loop (and with the patched loop) is checked on ``CHECK_SAMPLES``
  samples and recorded;
* ``data_generation`` builds the same ``X`` (bit for bit: same random
  stream, same floating-point operations) without its unused test set and
  without full-size temporaries, and ``AMP`` divides ``X`` by ``sqrt d`` in place
  (``uX = np.divide(X, np.sqrt(D), out=X)``).  The published version holds five
  arrays of shape ``(n, d, d, 2, 2)`` in float64 at once (``16 n d^2`` bytes each:
  3.2 GB at ``d = 100``, ``alpha = 1``); this one holds one.  ``d = 200`` would need
  51 GB per array at ``alpha = 1``, so the runs are at ``d = 100``.  Bitwise equality
  with the published ``data_generation``, and equality of the AMP output with
  and without the in-place division, are checked at ``d = 12``.

Settings: ``rho = 0.5``, ``alpha in {0.4, 1}``, ``d = 100``, seeds 0 and 1
(``np.random.seed``, the published code draws from NumPy's global generator),
``AMP(..., iterations=100, damping=0.5, tol=1e-5)``: the defaults of the
published ``AMP_experiment`` (its script uses 500 iterations; the number each
run used is recorded).  The book's state evolution (``aimlib``) is recorded
next to them (``E_S = 0.278`` at ``alpha = 0.4``, ``0.080`` at ``alpha = 1``).

Run (from the repository root, with ``OMP_NUM_THREADS=1`` etc. on a shared machine):
``python scripts/published_hardmax_patched.py --repo PATH`` with ``PATH`` a
checkout of the repository above.  Writes
``benchmarks/results/published_hardmax_patched.json``.  It takes about 11
minutes of one core (19 minutes of wall time on a shared two-core machine; the
eight AMP runs, ``alpha = 1`` dominating) and 3.4 GB of memory at its peak.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import resource
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _common import write_record  # noqa: E402

SOURCE = "AMP_hardmax.py"
GLOBALS = ("rng", "L")
RHO, D, ALPHAS, SEEDS = 0.5, 100, (0.4, 1.0), (0, 1)
ITERATIONS, DAMPING, TOL = 100, 0.5, 1e-5
CHECK_SAMPLES = 400

#: (a) the outputs from the AIM index h_12 = h'_12 / sqrt 2; (b) gOut, the gradient of log Phi_2
#: for the AIM differences u_i = h_ii - h'_12 / sqrt 2 (variance 3V/2, correlation 1/3)
PATCH = [
    ("from scipy.stats import multivariate_normal\n\ndef bvn_pdf_cdf",
     "from scipy.stats import multivariate_normal, norm\n\ndef bvn_pdf_cdf"),
    ("    h = np.einsum('mijab,ij->mab', X, S) / D\n"
     "    h_test = np.einsum('mijab,ij->mab', X_test, S) /D\n",
     "    h = np.einsum('mijab,ij->mab', X, S) / D\n"
     "    h_test = np.einsum('mijab,ij->mab', X_test, S) /D\n"
     "    # AIM index: X[..., a, b] (a != b) is sqrt(2) times the AIM sensing matrix\n"
     "    h = h / np.where(np.eye(L), 1, np.sqrt(2))\n"
     "    h_test = h_test / np.where(np.eye(L), 1, np.sqrt(2))\n"),
    ("    r = np.sqrt(2*V)\n",
     "    r = np.sqrt(3*V/2)  # sd of u_i = h_ii - h_12/sqrt(2): V + V/2\n"),
    ("        k1 = s11 * (omega[i,0,0] - omega[i,0,1]) / r\n"
     "        k2 = s22 * (omega[i,1,1] - omega[i,0,1]) / r\n"
     "        rho = s11 * s22 /2 \n",
     "        k1 = s11 * (omega[i,0,0] - omega[i,0,1]/np.sqrt(2)) / r\n"
     "        k2 = s22 * (omega[i,1,1] - omega[i,0,1]/np.sqrt(2)) / r\n"
     "        rho = s11 * s22 /3\n"),
    ("        ratio = phi2 / max(Phi2, 1e-300)      \n\n"
     "        g11 =  s11 / r * ratio\n"
     "        g22 =  s22 / r * ratio\n"
     "        g12 = -(s11 / r + s22 / r) * ratio\n",
     "        c = np.sqrt(1.0 - rho * rho)\n"
     "        A1 = norm.pdf(k1) * norm.cdf((k2 - rho * k1) / c) / max(Phi2, 1e-300)\n"
     "        A2 = norm.pdf(k2) * norm.cdf((k1 - rho * k2) / c) / max(Phi2, 1e-300)\n\n"
     "        g11 =  s11 / r * A1\n"
     "        g22 =  s22 / r * A2\n"
     "        g12 = -(g11 + g22) / np.sqrt(2)\n"),
]
#: execution aid (no number changes): divide X by sqrt(D) in place
IN_PLACE = ("    uX = X / np.sqrt(D)", "    uX = np.divide(X, np.sqrt(D), out=X)")


def replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise ValueError(f"{SOURCE} at this commit does not hold exactly once:\n{old}")
    return text.replace(old, new)


def load_functions(text: str, name: str = SOURCE) -> dict:
    """Execute the imports, function definitions and the globals ``rng``, ``L`` of a published script."""
    tree = ast.parse(text)
    keep = [node for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef))
            or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in GLOBALS)]
    sys.modules.setdefault("pandas", types.ModuleType("pandas"))
    namespace: dict = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), name, "exec"), namespace)
    return namespace


# ----------------------------------------------------------------- execution aids

def _phi2_exact(k1, k2, tau):
    from aimlib.channels.hardmax import log_bvn_cdf
    return np.exp(log_bvn_cdf(k1, k2, tau))


def _signs(Y):
    return np.where(Y[:, 0, 0] == 1.0, 1.0, -1.0), np.where(Y[:, 1, 1] == 1.0, 1.0, -1.0)


def gout_published(Y, omega, V):
    """The published ``gOut``, vectorised, with the exact ``Phi_2``."""
    s11, s22 = _signs(Y)
    r = np.sqrt(2 * V)
    k1 = s11 * (omega[:, 0, 0] - omega[:, 0, 1]) / r
    k2 = s22 * (omega[:, 1, 1] - omega[:, 0, 1]) / r
    rho = s11 * s22 / 2
    Phi2 = _phi2_exact(k1, k2, rho)
    expo = -(k1 * k1 - 2 * rho * k1 * k2 + k2 * k2) / (2.0 * (1.0 - rho * rho))
    phi2 = np.where(expo < -700, 0.0, np.exp(np.maximum(expo, -700.0))) / (
        2.0 * np.pi * np.sqrt(1.0 - rho * rho))
    ratio = phi2 / np.maximum(Phi2, 1e-300)
    G = np.zeros_like(omega)
    G[:, 0, 0] = s11 / r * ratio
    G[:, 1, 1] = s22 / r * ratio
    G[:, 0, 1] = -(s11 / r + s22 / r) * ratio
    return G


def gout_patched(Y, omega, V):
    """The patched ``gOut`` (change (b)), vectorised, with the exact ``Phi_2``."""
    from scipy import special
    s11, s22 = _signs(Y)
    r = np.sqrt(3 * V / 2)
    k1 = s11 * (omega[:, 0, 0] - omega[:, 0, 1] / np.sqrt(2)) / r
    k2 = s22 * (omega[:, 1, 1] - omega[:, 0, 1] / np.sqrt(2)) / r
    rho = s11 * s22 / 3
    c = np.sqrt(1.0 - rho * rho)
    Phi2 = np.maximum(_phi2_exact(k1, k2, rho), 1e-300)
    pdf = lambda x: np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)  # noqa: E731
    A1 = pdf(k1) * special.ndtr((k2 - rho * k1) / c) / Phi2
    A2 = pdf(k2) * special.ndtr((k1 - rho * k2) / c) / Phi2
    G = np.zeros_like(omega)
    G[:, 0, 0] = s11 / r * A1
    G[:, 1, 1] = s22 / r * A2
    G[:, 0, 1] = -(G[:, 0, 0] + G[:, 1, 1]) / np.sqrt(2)
    return G


def data_generation_lean(hardmax, D, rho, alpha, L=2, chunk=256):
    """The published ``data_generation`` with one full-size array; returns ``X, y_published, y_aim, S``."""
    R, N = int(rho * D), int(alpha * D**2)
    X_mu = np.random.normal(0, 1, (N, D, L))
    np.random.normal(0, 1, (N, D, L))  # the published unused test tokens: keeps the random stream
    X = np.einsum("mia,mjb->mijab", X_mu, X_mu)
    for i in range(D):
        for a in range(L):
            X[:, i, i, a, a] -= 1.0
    for start in range(0, N, chunk):
        block = X[start:start + chunk]
        block[...] = (np.einsum("mijab->mjiab", block) + block) / np.sqrt(2)
    for a in range(L):
        X[:, :, :, a, a] /= np.sqrt(2)
    W = np.random.normal(0, 1, (D, R))
    S = W @ W.T / np.sqrt(R)
    h = np.einsum("mijab,ij->mab", X, S) / D
    return X, hardmax(h), hardmax(h / np.where(np.eye(L), 1, np.sqrt(2))), S, X_mu


# ----------------------------------------------------------------- checks

def check_sqrt2(published: dict, d: int = 40, alpha: float = 1.0, seeds=(0, 1, 2, 3)) -> dict:
    """The published index against the AIM index computed from the same tokens and teacher."""
    ratios, corr, aim_ratio, aim_corr, off, diag = [], [], [], [], [], []
    for seed in seeds:
        np.random.seed(seed)
        X, _, _, S, X_mu = data_generation_lean(published["hardmax"], d, RHO, alpha)
        h = np.einsum("mijab,ij->mab", X, S) / d
        S_book = S / np.sqrt(d)
        h_aim = np.einsum("mia,ij,mjb->mab", X_mu, S_book, X_mu) / np.sqrt(d)
        h_aim[:, [0, 1], [0, 1]] -= np.trace(S_book) / np.sqrt(d)
        off.append(float(np.max(np.abs(h[:, 0, 1] / h_aim[:, 0, 1] - np.sqrt(2)))))
        diag.append(float(np.max(np.abs(h[:, [0, 1], [0, 1]] - h_aim[:, [0, 1], [0, 1]]))))
        for hh, rat, cor in ((h, ratios, corr), (h_aim, aim_ratio, aim_corr)):
            rat.append(hh[:, 0, 1].var() / hh[:, [0, 1], [0, 1]].var())
            cor.append(np.corrcoef(hh[:, 0, 0] - hh[:, 0, 1], hh[:, 1, 1] - hh[:, 0, 1])[0, 1])
    return {"d": d, "n": int(alpha * d * d), "seeds": list(seeds),
            "published_var_h12_over_var_h11": float(np.mean(ratios)),
            "published_corr_u1_u2": float(np.mean(corr)),
            "aim_var_h12_over_var_h11": float(np.mean(aim_ratio)),
            "aim_corr_u1_u2": float(np.mean(aim_corr)),
            "max_abs_h12_ratio_minus_sqrt2": max(off),
            "max_abs_diagonal_difference": max(diag)}


def check_aids(published: dict, patched: dict, d: int = 12, alpha: float = 2.0) -> dict:
    """Bitwise data generation; vectorised gOut against the loops; in-place division."""
    out = {}
    for name, ns in (("published", published), ("patched", patched)):
        np.random.seed(7)
        X, y, S = ns["data_generation"](d, RHO, alpha)
        np.random.seed(7)
        X2, y_pub, y_aim, S2, _ = data_generation_lean(published["hardmax"], d, RHO, alpha)
        out[f"data_generation_{name}_bitwise_equal"] = bool(
            np.array_equal(X, X2) and np.array_equal(S, S2)
            and np.array_equal(y, y_pub if name == "published" else y_aim))
    rng = np.random.default_rng(3)
    Y = y_aim[:CHECK_SAMPLES]
    for name, loop, vec, ns in (("published", published["gOut"], gout_published, published),
                                ("patched", patched["gOut"], gout_patched, patched)):
        errs = []
        for V in (0.3, 1.0, 3.0):
            omega = rng.normal(0, 1, (len(Y), 2, 2))
            np.random.seed(0)
            g_loop, g_vec = loop(Y, omega, V), vec(Y, omega, V)
            errs.append(float(np.max(np.abs(g_loop - g_vec)) / np.max(np.abs(g_loop))))
        out[f"gout_{name}_max_relative_difference"] = max(errs)
    # the in-place division leaves AMP's output unchanged
    np.random.seed(11)
    X, y, S = published["data_generation"](d, RHO, alpha)
    amp_in_place = load_functions(replace_once(published["_text"], *IN_PLACE))
    results = []
    for fn in (published["AMP"], amp_in_place["AMP"]):
        np.random.seed(5)
        results.append(fn(X.copy(), y, S, RHO, iterations=5, damping=DAMPING, tol=TOL))
    out["amp_in_place_equal"] = bool(np.array_equal(results[0][0], results[1][0])
                                     and results[0][1] == results[1][1])
    out["checked_at"] = {"d": d, "alpha": alpha, "gout_samples": CHECK_SAMPLES}
    return out


# ----------------------------------------------------------------- runs

def run_amp(amp_ns: dict, gout, y_kind: str, hardmax, d: int, alpha: float, seed: int) -> dict:
    np.random.seed(seed)
    X, y_pub, y_aim, S, _ = data_generation_lean(hardmax, d, RHO, alpha)
    y = y_pub if y_kind == "published" else y_aim
    calls = [0]

    def counted(Y, omega, V):
        calls[0] += 1
        return gout(Y, omega, V)

    amp_ns["gOut"] = counted
    start = time.perf_counter()
    _, error = amp_ns["AMP"](X, y, S, RHO, iterations=ITERATIONS, damping=DAMPING, tol=TOL)
    seconds = time.perf_counter() - start
    del X
    return {"alpha": alpha, "seed": seed, "n": int(alpha * d * d), "error_eval": float(error),
            "iterations": calls[0] // 3, "seconds": seconds}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True,
                        help="a checkout of FabrizioBoncoraglio/BO_ExtensiveRankAttention")
    parser.add_argument("--d", type=int, default=D)
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--out", type=Path, default=None,
                        help="the record (default benchmarks/results/published_hardmax_patched.json)")
    args = parser.parse_args(argv)
    path = args.repo / SOURCE
    if not path.is_file():
        parser.error(f"--repo must hold {SOURCE}")
    try:
        commit = subprocess.run(["git", "-C", str(args.repo), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    text = path.read_text()
    patched_text = text
    for old, new in PATCH:
        patched_text = replace_once(patched_text, old, new)
    diff = "".join(difflib.unified_diff(text.splitlines(True), patched_text.splitlines(True),
                                        f"a/{SOURCE}", f"b/{SOURCE}"))
    print(diff)
    published = load_functions(text)
    published["_text"] = text
    patched = load_functions(patched_text, f"{SOURCE} (patched)")

    sqrt2 = check_sqrt2(published)
    print("sqrt 2 check:", sqrt2)
    aids = check_aids(published, patched)
    print("execution aids:", aids)
    if not all(aids[k] for k in aids if k.endswith("equal")):
        raise SystemExit("an execution aid does not reproduce the published code")

    from aimlib import state_evolution as se
    se_book = {str(a): float(se.solve(a, "hardmax", T=2, rho=RHO).mmse) for a in args.alphas}
    print("book SE:", se_book)

    amp = load_functions(replace_once(text, *IN_PLACE))
    runs = []
    for alpha in args.alphas:
        for seed in args.seeds:
            for variant, gout, y_kind in (("published", gout_published, "published"),
                                          ("patched", gout_patched, "aim")):
                row = {"variant": variant, **run_amp(amp, gout, y_kind, published["hardmax"],
                                                     args.d, alpha, seed)}
                print(row, flush=True)
                runs.append(row)
    summary = {}
    for alpha in args.alphas:
        summary[str(alpha)] = {"se_book": se_book[str(alpha)]}
        for variant in ("published", "patched"):
            e = [r["error_eval"] for r in runs if r["alpha"] == alpha and r["variant"] == variant]
            summary[str(alpha)][variant] = {"mean": float(np.mean(e)), "errors": e}
    record = {"source": "FabrizioBoncoraglio/BO_ExtensiveRankAttention", "file": SOURCE,
              "commit": commit, "diff": diff.splitlines(),
              "settings": {"d": args.d, "rho": RHO, "alphas": args.alphas, "seeds": args.seeds,
                           "iterations": ITERATIONS, "damping": DAMPING, "tol": TOL,
                           "metric": "error_eval = ||sqrt(d) hatS - S||_F^2 / d^2 = E_S"},
              "sqrt2_check": sqrt2, "execution_aid_checks": aids, "runs": runs,
              "summary": summary,
              "maxrss_gigabytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}
    print("summary:", summary)
    write_record("published_hardmax_patched", record, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
