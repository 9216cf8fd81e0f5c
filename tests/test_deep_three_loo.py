"""The channel step's estimates against leave-one-out estimates with history (``book/data/deep_three_loo*.csv``,
chapter "Three layers", section "What the channel step meets"): the loop resumed from a callback's state, the
leave-one-out tool's arguments, a control whose run follows its state evolution, the rows and the findings."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import amp, channels, model
from aimlib.amp.leave_one_out import left_out_indices, regression
from aimlib.amp.loop import resume
from aimlib.amp.problem import make_problem
from aimlib.backend import to_host
from aimlib.index_map import IndexMap
from script_support import import_script, made_by_args


def _followed(d: int, iterations: int):
    """A three-layer run of the chapter (alpha = 1, seed 0, start 0.1) at ``d``: ``(ch, data, states)`` with a host
    copy of the state after every iteration."""
    fisher, gamp = import_script("deep_three_fisher"), import_script("deep_three_gamp")
    ch, data, S, _, init, init_m = gamp.problem(1.0, d, 0, 0.1)
    states = {}
    import_script("deep_three_inputs").follow(ch, data, S, init, init_m, iterations,
                                              lambda s: states.__setitem__(s.t, fisher.snapshot(s)))
    return ch, data, states


def test_resume_continues_the_loop_to_the_last_digit():
    """From the state the loop hands its callback after iteration ``t0``, ``resume`` on the same data reaches the
    loop's own estimate ``k`` iterations later exactly (the channel step, prior step and damping are the loop's),
    and it refuses a square channel's problem."""
    ch, data, states = _followed(40, 9)
    p = make_problem(to_host(data.X), to_host(data.y), ch, data.priors, None, None, "float64", None, 64.0,
                     0.5, "both")
    for t0, k in ((2, 7), (5, 3), (8, 1)):
        for a, b in zip(resume(p, states[t0], k), states[t0 + k].S_hat):
            assert np.array_equal(np.asarray(a), b)
    sq = model.sample_dataset(0.5, 12, 2, 0.5, channels.UntiedSoftmax(), seed=0)
    with pytest.raises(ValueError, match="square"):
        resume(make_problem(sq.X, sq.y, channels.UntiedSoftmax(), sq.priors, None, None, "float64", None, 64.0,
                            0.5, "both"), states[2], 1)


def test_left_out_indices_refuses_bad_arguments():
    """The sample, the step and the numbers of iterations run again are named with their ranges."""
    ch, data, states = _followed(30, 5)
    X, y = to_host(data.X), to_host(data.y)
    for kwargs, word in ((dict(mu=len(y), t=5, steps=(1,)), "mu"), (dict(mu=-1, t=5, steps=(1,)), "mu"),
                         (dict(mu=0, t=2, steps=(1,)), "t"), (dict(mu=0, t=5, steps=(4,)), "k"),
                         (dict(mu=0, t=5, steps=(0,)), "k")):
        with pytest.raises(ValueError, match=word):
            left_out_indices(X, y, ch, data.priors, states=states, **kwargs)


def _regression(rows, k: int, layer: int = 1) -> tuple[float, float]:
    """``(beta, miss)`` over the rows at ``k``: the regression coefficient of the left-out correction on the Onsager
    term and the channel step's distance to the left-out index, both in units of the term (``deep_three_loo``'s
    columns)."""
    at = [r for r in rows if int(r["k"]) == k]
    cross, ons, err = (np.array([float(r[f"{c}_{layer}"]) for r in at]) for c in ("cross", "ons", "err"))
    return regression(cross, ons)[0], float(np.sqrt(err.sum() / ons.sum()))


def test_where_gamp_rie_follows_its_state_evolution_omega_is_the_left_out_index():
    """The control: one hardmax layer (``T = 2``, Wishart ``rho = 0.5``, alpha = 0.3, d = 80, damping 0.5), the
    channel step of iteration 20, 30 samples.  Left out of the last iteration only, a sample's index moves by
    half the Onsager term (``beta`` 0.51 in this run: the damping keeps half of the last estimate, which saw the
    sample); left out of the last eight, by the whole term (``beta`` 1.005), and the channel step's estimate is
    within 0.21 of the term's size of the left-out index, against 0.50 with one iteration (the rest is the
    scatter of a single sample)."""
    script = import_script("deep_three_loo")
    fisher = import_script("deep_three_fisher")
    ch = channels.Hardmax()
    data = model.sample_dataset(0.3, 80, 2, 0.5, ch, seed=0)
    states = {}
    amp.gamp_rie(data.X, data.y, ch, data.priors, S=data.S, stop="prediction", tol=1e-12, max_iter=19,
                 on_max_iter="return", callback=lambda s: states.__setitem__(s.t, fisher.snapshot(s)))
    index, X, y = IndexMap(data.X), to_host(data.X), to_host(data.y)
    omega, _ = fisher.channel_inputs(index, states[19])
    h = fisher.indices(index, states[19].S_hat)
    rows = []
    for mu in np.random.default_rng(0).choice(len(y), 30, replace=False):
        left = left_out_indices(X, y, ch, data.priors, int(mu), states, 20, (1, 8))
        rows += [{"k": k, **script.sample_sums(h[mu], omega[mu], left[k])} for k in (1, 8)]
    (beta_1, miss_1), (beta_8, miss_8) = _regression(rows, 1), _regression(rows, 8)
    assert 0.45 < beta_1 < 0.57 and 0.95 < beta_8 < 1.06
    assert miss_8 < 0.25 and miss_1 > 0.45


NAMES = ("deep_three_loo.csv", "deep_three_loo_d200.csv", "deep_three_loo_own.csv")


def test_the_rows_are_the_made_by_runs():
    """Every ``(d, seed)`` the made-by command names has, at each of its steps ``t`` and numbers ``k``, one row for
    each of its ``--samples`` samples, the same samples at every ``t``; ``err = loo + ons - 2 cross`` (the columns'
    algebra) to 1e-9; the rows of the first sample at d = 100, seed 0, t = 10 are the script's again, to 1e-8."""
    script = import_script("deep_three_loo")
    for name in NAMES:
        args, rows = made_by_args("deep_three_loo", name)
        for d in args.d:
            for seed in args.seeds:
                run = [r for r in rows if int(r["d"]) == d and int(r["seed"]) == seed]
                mus = [sorted({int(r["mu"]) for r in run if int(r["t"]) == t}) for t in args.at]
                assert len(mus[0]) == args.samples and all(m == mus[0] for m in mus)
                assert len(run) == len(args.at) * len(args.steps) * args.samples
                assert {int(r["k"]) for r in run} == set(args.steps)
        for r in rows:
            for layer in (1, 2, 3):
                x = {c: float(r[f"{c}_{layer}"]) for c in ("err", "loo", "ons", "cross")}
                assert x["err"] == pytest.approx(x["loo"] + x["ons"] - 2 * x["cross"], rel=1e-9, abs=1e-12)
    args, rows = made_by_args("deep_three_loo", NAMES[0])
    first = [r for r in rows if (int(r["d"]), int(r["seed"]), int(r["t"])) == (100, 0, 10)][0]
    mu = int(first["mu"])
    fisher = import_script("deep_three_fisher")
    ch, data, states = _followed(100, 9)
    index = IndexMap(data.X)
    omega, _ = fisher.channel_inputs(index, states[9])
    h = fisher.indices(index, states[9].S_hat)
    left = left_out_indices(to_host(data.X), to_host(data.y), ch, data.priors, mu, states, 10, args.steps)
    for r in (r for r in rows if (int(r["d"]), int(r["seed"]), int(r["t"]), int(r["mu"])) == (100, 0, 10, mu)):
        again = script.sample_sums(h[mu], omega[mu], left[int(r["k"])])
        assert [float(r[c]) for c in again] == pytest.approx(list(again.values()), rel=1e-8, abs=1e-14)


def _betas(name: str, d: int, t: int, k: int) -> list[tuple[float, float]]:
    """``(beta, stderr)`` per layer at ``(d, t, k)`` of a committed file, pooled over its runs and samples."""
    rows = [r for r in made_by_args("deep_three_loo", name)[1]
            if (int(r["d"]), int(r["t"]), int(r["k"])) == (d, t, k)]
    return [regression([float(r[f"cross_{l}"]) for r in rows], [float(r[f"ons_{l}"]) for r in rows])
            for l in (1, 2, 3)]


def test_layer_2s_echo_outgrows_its_onsager_term_as_its_ries_own_coefficient_does():
    """The chapter's findings (alpha = 1).  One iteration left out gives the damping's share, beta_1 between 0.44
    and 0.61 everywhere; eight give 0.89 to 1.00 (d = 100) and 0.86 to 0.95 (d = 200) at iteration 10, and layer 2's
    beta_8 then grows to 1.22 (t = 25) and 1.16 (t = 40) at d = 100 and 1.08 (t = 40) at d = 200, standard errors
    0.035 to 0.065, while layers 1 and 3 stay within 0.15 of one; layer 2's miss is 0.47 at t = 40 and 0.32 at
    t = 10 (d = 100).  The RIEs' own coefficients over mmse at iteration 40 (``deep_three_across.csv``, means of
    three): layer 2 1.23 and 1.18, layer 1 1.09 and 1.04, layer 3 1.01 and 1.00; wherever both are measured
    (t = 10, 40) beta_8 lies 0.005 to 0.15 below that ratio; layer 1's beta_8 at t = 10 is about four standard
    errors below one at both d; the miss is 0.16 to 0.53.  With them from iteration 10
    (``deep_three_loo_own.csv``, the same samples) layer 2's beta_8 is 1.00 at t = 40, layers 1 and 3 0.92 and 0.91."""
    files = {100: NAMES[0], 200: NAMES[1]}
    steps = {100: (10, 25, 40), 200: (10, 40)}
    for d, name in files.items():
        for t in steps[d]:
            assert all(0.435 < b < 0.615 for b, _ in _betas(name, d, t, 1))
            eight = _betas(name, d, t, 8)
            assert abs(eight[0][0] - 1) < 0.15 and abs(eight[2][0] - 1) < 0.15
            if t == 10:
                low, high = {100: (0.885, 1.005), 200: (0.855, 0.955)}[d]
                assert all(low < b < high for b, _ in eight)
    layer_2 = {(d, t): _betas(files[d], d, t, 8)[1] for d, t in ((100, 25), (100, 40), (200, 40))}
    assert [round(b, 2) for b, _ in layer_2.values()] == [1.22, 1.16, 1.08]
    assert all(0.034 < e < 0.065 for _, e in layer_2.values())
    late = [r for r in made_by_args("deep_three_loo", NAMES[0])[1] if (int(r["t"]), int(r["k"])) == (40, 8)]
    early = [r for r in made_by_args("deep_three_loo", NAMES[0])[1] if (int(r["t"]), int(r["k"])) == (10, 8)]
    assert [round(_regression(x, 8, 2)[1], 2) for x in (late, early)] == [0.47, 0.32]
    _, across = made_by_args("deep_three_across", "deep_three_across.csv")
    own = {d: [np.mean([float(r[f"div_{l}"]) for r in across if (int(r["d"]), int(r["t"])) == (d, 40)])
               for l in (1, 2, 3)] for d in (100, 200)}
    assert [round(x, 2) for x in own[100]] == [1.09, 1.23, 1.01]
    assert [round(x, 2) for x in own[200]] == [1.04, 1.18, 1.0]
    gaps, misses = [], []
    for d, name in files.items():
        rows = made_by_args("deep_three_loo", name)[1]
        for t in steps[d]:
            at = [r for r in rows if (int(r["t"]), int(r["k"])) == (t, 8)]
            misses += [_regression(at, 8, l)[1] for l in (1, 2, 3)]
            if t in (10, 40):
                ratio = [np.mean([float(r[f"div_{l}"]) for r in across if (int(r["d"]), int(r["t"])) == (d, t)])
                         for l in (1, 2, 3)]
                gaps += [o - b for o, (b, _) in zip(ratio, _betas(name, d, t, 8))]
    assert 0.004 < min(gaps) and max(gaps) < 0.152
    assert [round(min(misses), 2), round(max(misses), 2)] == [0.16, 0.53]
    for d in (100, 200):
        b, e = _betas(files[d], d, 10, 8)[0]
        assert 3.9 < (1 - b) / e < 4.3
    removed = _betas("deep_three_loo_own.csv", 100, 40, 8)
    assert [round(b, 2) for b, _ in removed] == [0.92, 1.0, 0.91]
