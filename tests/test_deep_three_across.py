"""What three-layer GAMP-RIE's channel step meets across the layers (``book/data/deep_three_across.csv``, chapter
"Three layers", section "What the channel step meets"): the memory and the moments across layers read back from
laws they are known on, the rows, and the chapter's findings."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import draw_law, response_moments
from aimlib.index_map import IndexMap
from aimlib.model import index_covariance
from script_support import committed, import_script, made_by_args


@pytest.mark.parametrize("cross", [0.0, -0.15])
def test_the_memory_is_response_moments_memory_on_the_same_draws(cross):
    """On the draws ``response_moments`` makes from the same seed the script's memory is the memory of the means (the
    reference averages its batches' memories: within a third of its standard error) and its standard error the
    reference's, to rounding (the same ten batches).  On the law ``g_out`` assumes (``cross = 0``) every entry is
    within four standard errors of zero; with the cross term ``e_12 = -0.15`` the entries (1, 2) and (2, 1), which
    the cross term moves, are the reference's."""
    ch, q, Q0 = DeepAttention(0.5, layers=3), (0.3, 0.4, 0.5), (1.0, 1.0, 1.0)
    ref = response_moments(ch, q, Q0, cross=cross, n=20_000, seed=7)
    rng = np.random.default_rng(7)
    _, Q0v, V, s = ch.law_args(q, Q0, 0.0)
    omega, h, _, _ = draw_law(q, Q0v, s, cross, 3, 20_000, rng)
    mem, se, _ = import_script("deep_three_across").memory(ch, ch(h, seed=rng), omega, V)
    np.testing.assert_allclose(se, ref.se["memory"], rtol=1e-8, atol=1e-12)
    assert np.all(np.abs(mem - ref.memory) < se / 3)
    if cross == 0.0:
        assert np.all(np.abs(mem) < 4 * se)


def test_the_moments_across_layers_of_fresh_tokens_are_the_traces():
    """Indices of three fixed matrices on 4000 fresh tokens (d = 30, T = 2): the script's moments across layers are
    ``Tr(A B) / d`` (:func:`~aimlib.model.index_covariance`) within four times their sampling error, and its
    columns name the pairs the right way round (``hq_lk`` reads layer ``l``'s estimate against layer ``k``'s
    teacher)."""
    script = import_script("deep_three_across")
    rng, d = np.random.default_rng(3), 30
    sym = [(a + a.T) / np.sqrt(2 * d) for a in rng.standard_normal((6, d, d))]
    S = sym[:3]
    S_hat = [0.7 * S[0] + 0.5 * S[1], 0.6 * S[1] - 0.4 * S[2] + 0.3 * sym[3], 0.5 * S[2] + 0.6 * S[0] + 0.4 * sym[4]]
    index = IndexMap(rng.standard_normal((4000, 2, d)))
    out = script.cross_moments(script.indices(index, S), script.indices(index, S_hat), S, S_hat)
    for l, k in script.PAIRS:
        exact = index_covariance(S_hat[l - 1], S_hat[k - 1])
        assert out[f"fqq_{l}{k}"] == exact and abs(out[f"qq_{l}{k}"] - exact) < 4 * 0.7 / np.sqrt(4000 * 3)
    for l, k in script.ORDERED:
        exact = index_covariance(S[k - 1], S_hat[l - 1])
        assert out[f"fhq_{l}{k}"] == exact and abs(out[f"hq_{l}{k}"] - exact) < 4 * 0.7 / np.sqrt(4000 * 3)
    assert out["fhq_31"] == pytest.approx(0.6 * index_covariance(S[0]), abs=0.15)


def test_the_rows_are_the_made_by_runs():
    """Every ``(d, seed)`` the made-by command names, at each of its steps, and the first row (d = 100, seed 0,
    t = 10) is the script's own output again, to 1e-9."""
    script = import_script("deep_three_across")
    args, rows = made_by_args("deep_three_across", "deep_three_across.csv")
    keys = [(int(r["d"]), int(r["seed"]), int(r["t"])) for r in rows]
    assert keys == [(d, s, t) for d in args.d for s in args.seeds for t in args.at]
    again = script.run(int(rows[0]["d"]), int(rows[0]["seed"]), args.eps, (int(rows[0]["t"]),))
    assert [float(rows[0][k]) for k in script.COLUMNS] == pytest.approx([again[0][k] for k in script.COLUMNS],
                                                                        rel=1e-9, abs=1e-12)


def _at(rows, d: int, t: int) -> dict:
    """Per column, the array over the data sets at ``(d, t)``."""
    found = [r for r in rows if (int(r["d"]), int(r["t"])) == (d, t)]
    assert len(found) == 3
    return {k: np.array([float(r[k]) for r in found]) for k in found[0]}


def test_the_memory_grows_and_stays_a_small_part_of_the_inputs():
    """The chapter's findings (alpha = 1, means of three data sets at d = 100, 200, 300; each quoted value within
    0.006).  Layer 2's memory diagonal is about +0.04 at t = 10 and -0.24, -0.16, -0.11 at t = 40; layer 1's +0.16,
    +0.14, +0.15 and -0.10, -0.03, 0.00; ``mem_23`` lies between -0.13 and -0.10 at t = 10 and 40; ``mem_21`` is
    -0.32, -0.26, -0.26 at t = 10 and within 0.04 of zero at t = 40; the batch standard errors are at most 0.065,
    0.035, 0.025.  The memory's share of every input is below 0.0025; the moments across layers are a fresh
    token's within 0.0060, 0.0049, 0.0027 over every run, pair and step; the RIEs' own coefficients over mmse at
    t = 40 are 1.09, 1.04, 1.03 (layer 1) and 1.23, 1.18, 1.09 (layer 2).  The state evolution's memory at its
    fixed point (the chapter's 60 000 draws of its law with the cross term) has every off-diagonal entry within
    0.02 of zero, standard errors below 0.03, and layer 2's diagonal near -0.05."""
    script = import_script("deep_three_across")
    _, rows = made_by_args("deep_three_across", "deep_three_across.csv")
    expect = {"22": ((0.04,) * 3, (-0.24, -0.16, -0.11)), "11": ((0.16, 0.14, 0.15), (-0.10, -0.03, 0.00)),
              "21": ((-0.32, -0.26, -0.26), None)}
    for i, d in enumerate((100, 200, 300)):
        early, late = _at(rows, d, 10), _at(rows, d, 40)
        for x, (at_10, at_40) in expect.items():
            assert early[f"mem_{x}"].mean() == pytest.approx(at_10[i], abs=0.006)
            assert at_40 is None or late[f"mem_{x}"].mean() == pytest.approx(at_40[i], abs=0.006)
        assert abs(late["mem_21"].mean()) < 0.04
        assert all(-0.13 < r["mem_23"].mean() < -0.10 for r in (early, late))
        se = max(np.sqrt(np.mean(r[f"se_{l}{k}"] ** 2)) for r in (early, late) for l in (1, 2, 3) for k in (1, 2, 3))
        assert se < (0.065, 0.035, 0.025)[i]
        run = [r for r in rows if int(r["d"]) == d]
        assert max(float(r[f"share_{l}"]) for r in run for l in (1, 2, 3)) < 0.0025
        fresh = max(abs(float(r[f"{x}_{p}"]) - float(r[f"f{x}_{p}"])) for r in run
                    for x, ps in (("qq", script.PAIRS), ("hq", script.ORDERED)) for p in (f"{a}{b}" for a, b in ps))
        assert fresh == pytest.approx((0.0060, 0.0049, 0.0027)[i], abs=1e-4)
        assert [round(late[f"div_{l}"].mean(), 2) for l in (1, 2)] == [(1.09, 1.04, 1.03)[i], (1.23, 1.18, 1.09)[i]]
    se_rows = [r for r in committed("deep_three_cross_se.csv")[1] if float(r["alpha"]) == 1.0]
    m = np.array([np.mean([float(r[f"mmse_{k}"]) for r in se_rows]) for k in (1, 2, 3)])
    e12 = np.mean([float(r["e_12"]) for r in se_rows])
    law = response_moments(DeepAttention(0.5, layers=3), tuple(1.0 - m), (1.0,) * 3, cross=e12, n=60_000, seed=0)
    assert np.all(np.abs(law.memory - np.diag(np.diag(law.memory))) < 0.02) and np.all(law.se["memory"] < 0.03)
    assert law.memory[1, 1] == pytest.approx(-0.05, abs=0.01)
