"""Channels declare what they can do (``aimlib.channels.base.Channel``'s capability attributes), and the
interfaces ask them: the declarations match what the channels do, and no interface tests a channel's name."""
from __future__ import annotations

import ast
import math

import numpy as np
import pytest

from aimlib import channels
from aimlib.channels import hardmax_polytope, registry
from conftest import ROOT

NAMES = set(registry.CHANNELS)
#: where channel names may be compared: the channels themselves and their registry
OWNERS = ROOT / "aimlib" / "channels"


def _names_in(node) -> set:
    """The channel names among the string constants of ``node`` (a constant or a tuple/list/set of them)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {x.value for x in items if isinstance(x, ast.Constant) and x.value in NAMES}


def _about_a_channel(node) -> bool:
    text = ast.unparse(node)
    return "channel" in text or text in ("ch", "c", "name")


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "aimlib").rglob("*.py") if OWNERS not in p.parents),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_interface_compares_a_channel_name(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = [s for s in sides if _names_in(s)]
        others = [s for s in sides if not _names_in(s)]
        if named and any(_about_a_channel(s) for s in others):
            pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno}: compares a channel name "
                        f"({ast.unparse(node)}); ask the channel's declared capabilities instead")


@pytest.mark.parametrize("folder", ["state_evolution", "amp"])
def test_state_evolution_and_gamp_do_not_probe_channels(folder):
    for path in sorted((ROOT / "aimlib" / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr",
                                                                                               "getattr"):
                target = ast.unparse(node.args[0])
                assert not any(w in target for w in ("ch", "prior", "channel")), (
                    f"{path.relative_to(ROOT)}:{node.lineno}: probes {target} with {node.func.id}")


@pytest.mark.parametrize("name", sorted(NAMES))
def test_the_declared_noise_limits_are_the_bayes_side_s(name):
    """``t_limit`` with label noise refuses exactly where the noisy channel's ``fisher`` is not implemented."""
    cls = registry.CHANNELS[name]
    if not cls.bayes_side:                 # refused at every T, with or without noise, as the channel refuses
        ch = channels.make_channel(name)
        C = ch.n_indices * len(ch.sectors)
        for T, noise in ((2, 0.0), (3, 0.1)):
            assert "no Bayes side" in registry.t_limit(name, T, noise=noise)
        with pytest.raises(NotImplementedError):
            ch.fisher((0.2,) * C, (1.5,) * C, 2)
        return
    if "noise" not in cls.parameters:
        assert cls.noise_max_T == 0
        assert "no Bayes side with label noise" in registry.t_limit(name, 2, noise=0.1)
        return
    ch = channels.make_channel(name, noise=0.1)
    for T in (2, 3):
        refused = registry.t_limit(name, T, noise=0.1)
        if refused:
            with pytest.raises(NotImplementedError):
                ch.fisher(0.2, 1.5, T)
        else:
            assert math.isfinite(float(ch.fisher(0.2, 1.5, T)))
    assert registry.t_limit(name, 2) is None


def test_the_declared_largest_T_is_the_bayes_side_s():
    """Hardmax: the cones are offered up to ``max_T`` and refused beyond; the registry reads the class."""
    hm = channels.Hardmax()
    assert registry.MAX_T["hardmax"][0] == hm.max_T == hardmax_polytope.MAX_T
    assert math.isfinite(hm.fisher(0.2, 1.5, hm.max_T))
    with pytest.raises(ValueError, match="T"):
        hm.fisher(0.2, 1.5, hm.max_T + 1)
    assert "T <= 3" in registry.t_limit("hardmax", 4)
    assert registry.t_limit("softmax", 8) is None


def test_weak_threshold_dispatch_and_its_range():
    """``alpha_bar_WR`` at ``T = 2``: the closed form ``1/𝓕(0)``, checked against ``1/F_out`` at
    ``q -> 0`` by quadrature (``V = 1``); beyond ``threshold_max_T`` the registry and the channel refuse."""
    hm = channels.Hardmax()
    assert hm.weak_threshold(2) == pytest.approx(1.0 / hm.fisher(1e-9, 1.0 + 1e-9, 2), rel=1e-6)
    assert hm.weak_threshold(2) == pytest.approx(0.40341, abs=5e-6)
    top = hm.threshold_max_T
    assert registry.threshold_limit("hardmax", top) is None
    assert f"T <= {top}" in registry.threshold_limit("hardmax", top + 1)
    with pytest.raises(ValueError, match=f"<= {top}"):
        hm.weak_threshold(top + 1)


def test_declared_layers_and_oracle_match_the_channels():
    for name, cls in registry.CHANNELS.items():
        counts = cls.layer_counts or (cls.min_heads, cls.min_heads + 1)     # None: any number of heads
        assert (cls.layer_counts is None) == (cls.indices_parameter == "heads")
        made = [channels.make_channel(name, **{cls.indices_parameter: L}) if cls.indices_parameter
                else channels.make_channel(name) for L in counts]
        assert [ch.n_indices for ch in made] == list(counts)
        assert (cls.indices_parameter is None) == (cls.indices_parameter not in cls.parameters)
        assert callable(getattr(cls, "oracle_fisher", None)) == cls.has_oracle
        assert callable(getattr(cls, "tabulate", None)) == cls.tabulated
        assert ("beta" in cls.parameters) == hasattr(made[0], "beta") or name == "deep-hardmax"


def test_perfect_threshold_channels_have_exact_linear_measurements():
    """A ``'perfect'`` threshold needs noiseless linear measurements: ``F_out = k/V`` at every ``q`` (for a
    square index ``sum_s V_s F_s = k`` at every ratio of the errors)."""
    for name, cls in registry.CHANNELS.items():
        if cls.threshold == "perfect":
            ch = channels.make_channel(name)
            k = ch.linear_k(2)
            assert k is not None
            for q in ((0.1, 0.3), (0.7, 0.2)):
                q = q[:len(ch.sectors)]
                Q0 = (1.5,) * len(q)
                V = np.subtract(Q0, q)
                F = np.atleast_1d(ch.fisher(q[0] if len(q) == 1 else q, Q0[0] if len(q) == 1 else Q0, 2))
                assert np.dot(V, F) == pytest.approx(k, rel=1e-6)
