"""One meaning per symbol: the introduction's notation table is true of the chapters and of the library.

For the symbols of the table that chapters once used in a second sense, the prose
(outside code cells) must not use that sense again; each rule names the form it
forbids and what the book writes instead.  The library's docstrings, which the
reference prints beside the chapters, write the book's symbols too (``LIBRARY_RULES``).
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("*.md"))
CODE_CELL = re.compile(r"```\{code-cell\}.*?\n```", re.S)

#: (table symbol, forbidden pattern in prose, what the book writes instead, an example of the form)
RULES = [
    ("$A_{ab}$", r"(?<![\\A-Za-z])A_(?:[12i]\b|\{[12]\})", r"the hardmax gradients are \eta_1, \eta_2",
     r"s_1A_1/\sqrt{3V}"),
    ("$A_{ab}$", r"A = c\s*I", r"layer 1 mixes the tokens by M = cI + P", r"A = cI + P"),
    ("$c$", r"(?<![\\\w])c = \\sqrt", r"\bar\tau = \sqrt{1-\tau^2}", r"c = \sqrt{1-\tau^2}"),
    ("$c$", r"\\sum_\{?c\b", r"sums over a row run over b'", r"\sum_c e^{x}"),
    ("$c$", r"(?<![\\\w])c\\,d\^3|(?<![\\\w])c\\approx", r"k_{\rm eig}, k_{\rm mem} for cost constants", r"c\,d^3"),
    ("$c$", r"(?<![\\\w])c\(y\)", r"\chi(y) for a factor of the likelihood", r"c(y) = 1"),
    ("$c$", r"(?<![\\\w])cJ\b", r"\gamma J for the shift that a softmax output cannot see", r"h + cJ"),
    ("$c$", r"ratio \$c\$", r"\kappa_{\rm MP} for the ratio of a Marchenko-Pastur law", r"law of ratio $c$"),
    ("$\\mathcal F$", r"(?<![\\\w])G\((?:q/V|\\lambda)\)", r"\mathcal F(q/V)", r"G(q/V)/V"),
    ("$\\mathcal H(x)", r"\\Delta\s*(?:\\,)?\s*h\(\\(?:lambda|sigma)\)", r"\mathcal H(\lambda)", r"2\Delta\,h(\sigma)"),
    ("$c$", r"(?<![\\\w])cw\b", r"\bar\tau w for the second coordinate", r"\tau\kappa_1+cw"),
    ("$A_{ab}$", r"\bdA = dY", r"dM = dY_1 for the residual matrix", r"$dA = dY_1$"),
    ("$r,\\ \\rho = r/d$", r"\\rho_\{u", r"p_{u_i} for a density", r"\rho_{u_i}(0)"),
    ("$r,\\ \\rho = r/d$", r"correlation \$r\$|t_1t_2 r\\Big|\\lambda_2, r\)", r"\theta, \gamma for correlations",
     r"estimates of correlation $r$"),
    ("$r,\\ \\rho = r/d$", r"(?<![\\\w])r_\{12\}", r"\theta_{12} for the correlation of two layers' moments",
     r"$r_{12} = 1$"),
    ("$f_{\\rm RS}(q,\\hat q)$", r"\\Phi\(q,|\\partial_\{?(?:\\hat )?q\}?\\Phi|extr_\{q,\\hat q\}\\Phi",
     r"f_{\rm RS} for the free entropy (Phi is the normal distribution function)", r"\partial_q\Phi"),
    ("$\\tilde\\alpha = \\alpha/\\rho$", r"\\bar\\alpha\s*=\s*\\alpha/\\rho|\\bar\\alpha_\{\\rm WR\}|\\bar\\alpha\s*=\s*\(T\^2-T\)",
     r"\tilde\alpha = \alpha/\rho (hardmax, deep) and \bar\alpha_{\rm u} (untied)", r"\bar\alpha_{\rm WR} = 0.4034"),
    ("$L$", r"\$L\$ \(\$2\\times ?3\$\)", r"U for a matrix of coefficients", r"$L$ ($2\times3$)"),
    ("$L$", r"constants? \$L_a\$", r"\ell_a for the constant of a softmax row", r"its own constant $L_a$"),
]


#: (table symbol, forbidden pattern in aimlib's source, what the docstrings write instead, an example)
LIBRARY_RULES = [
    ("$\\mathcal F$", r"\bG\((?:q/V|lambda)\)", "𝓕(lambda) = V F_out, the hardmax output function", "G(q/V)/V"),
    ("$\\mathcal F$", r"Phi_T\(tau\)|\btau = q ?/ ?V", "𝓕_T(lambda), lambda = q/V (Phi is the normal distribution "
     "function, tau a correlation)", "F_out = Phi_T(tau) / V with tau = q / V"),
    ("$c$", r"\bA(?:_l)? = c ?I\b", "M = c I + P, the mixing of a deep layer", "X_1 = A X with A = c I + P"),
]
LIBRARY = sorted((ROOT / "aimlib").rglob("*.py"))


def _prose(path: Path) -> str:
    return CODE_CELL.sub("", path.read_text())


def _table() -> str:
    text = (ROOT / "book" / "intro.md").read_text()
    return text[text.index("## Notation"):text.index("## The chapters")]


@pytest.mark.parametrize("symbol", sorted({r[0] for r in RULES}))
def test_the_ruled_symbols_are_in_the_table(symbol):
    assert f"| {symbol}" in _table() or f"{symbol} " in _table(), f"{symbol} is not in the notation table"


@pytest.mark.parametrize("symbol, pattern, instead, example", RULES)
def test_no_chapter_gives_a_table_symbol_a_second_meaning(symbol, pattern, instead, example):
    hits = [f"{p.name}:{_prose(p)[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
            for p in CHAPTERS for m in re.finditer(pattern, _prose(p))]
    assert not hits, f"{symbol} used in another sense (write {instead}): {hits}"


@pytest.mark.parametrize("symbol, pattern, instead, example", RULES)
def test_each_rule_catches_the_form_it_forbids(symbol, pattern, instead, example):
    """A rule that matches nothing is no rule: each matches its own example of the forbidden form."""
    assert re.search(pattern, example), f"the rule for {symbol} misses {example!r}"


@pytest.mark.parametrize("symbol, pattern, instead, example", LIBRARY_RULES)
def test_the_library_writes_the_books_symbols(symbol, pattern, instead, example):
    assert re.search(pattern, example), f"the rule for {symbol} misses {example!r}"
    hits = [f"{p.relative_to(ROOT)}:{p.read_text()[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
            for p in LIBRARY for m in re.finditer(pattern, p.read_text())]
    assert LIBRARY and not hits, f"{symbol} written in another form (write {instead}): {hits}"
