"""``aimlib.tables``: text tables and packed lines that fit the book's output box."""
import numpy as np
import pytest

from aimlib.tables import OUTPUT_WIDTH, format_table, mean_se, pack_line


def test_output_width_is_the_box_of_the_theme():
    """656 px of text (688 px less 2 x 16 px padding) at 8.43 px a character."""
    assert OUTPUT_WIDTH == int((688 - 2 * 16) / (14 * 0.602))


def test_table_columns_are_as_wide_as_their_widest_entry_and_numbers_right_aligned():
    rows = [{"law": "gaussian", "d": 100, "gap": 0.0123},
            {"law": "sparse p=0.1", "d": 2000, "gap": -1.5}]
    text = format_table(rows, formats={"gap": "+.3f"})
    assert text.splitlines() == ["law              d     gap",
                                 "gaussian       100  +0.012",
                                 "sparse p=0.1  2000  -1.500"]


def test_table_from_columns_equals_table_from_rows():
    cols = {"alpha": [0.1, 0.25], "E": [np.float64(0.7451), 0.5222]}
    rows = [{"alpha": 0.1, "E": np.float64(0.7451)}, {"alpha": 0.25, "E": 0.5222}]
    assert format_table(cols, formats=".4f") == format_table(rows, formats=".4f")
    assert format_table(cols, formats=".4f").splitlines()[1] == "0.1000  0.7451"


def test_table_keeps_the_numbers_as_formatted():
    """Layout only: each entry is ``format(x, spec)``, integers and text as they are."""
    text = format_table({"n": [3], "x": [1 / 3], "note": ["0.5 +- 0.1"]}, formats={"x": ".6g"})
    assert text.splitlines()[1].split() == ["3", "0.333333", "0.5", "+-", "0.1"]
    assert format_table({"x": [1 / 3]}).splitlines()[1] == str(1 / 3)


def test_table_wider_than_the_box_is_refused():
    wide = {f"column {j}": [1.0] for j in range(12)}
    with pytest.raises(ValueError, match="width"):
        format_table(wide)
    assert max(map(len, format_table(wide, width=200).splitlines())) > OUTPUT_WIDTH
    assert all(len(line) <= 30 for line in format_table({"a": [1], "b": [2]}, width=30).splitlines())


@pytest.mark.parametrize("rows, kwargs, error", [
    ([], {}, ValueError),
    ({"a": [1, 2], "b": [1]}, {}, ValueError),
    ([{"a": 1}, {"b": 2}], {}, ValueError),
    ("a table", {}, TypeError),
    ([1, 2], {}, TypeError),
    ({"a": [1.0]}, {"width": 0}, ValueError),
    ({"a": [1.0]}, {"width": 2.5}, TypeError),
    ({"a": [1.0]}, {"gap": 0}, ValueError),
    ({"a": [1.0]}, {"formats": {"b": ".3f"}}, ValueError),
    ({"a": [1.0]}, {"formats": ".3q"}, ValueError),
    ({"a": [1.0]}, {"formats": 3}, TypeError),
])
def test_table_bad_inputs_raise(rows, kwargs, error):
    with pytest.raises(error):
        format_table(rows, **kwargs)


def test_pack_line_breaks_between_pieces_and_indents():
    parts = [f"d = {d}: +0.0123 +- 0.0456" for d in (50, 100, 200, 300, 400)]
    text = pack_line(parts)
    lines = text.splitlines()
    assert len(lines) == 3 and all(len(line) <= OUTPUT_WIDTH for line in lines)
    assert lines[0].endswith(",") and lines[1].startswith("  d = 200")
    assert text.replace(",\n  ", ", ") == ", ".join(parts)
    assert pack_line(["a", "b"], sep="; ") == "a; b"
    assert pack_line(["aaaa", "bb", "c"], sep="; ", width=8) == "aaaa;\n  bb; c"
    assert pack_line(["bbbb", "c"], head="alpha: ", width=10) == "alpha:\n  bbbb, c"
    words = "refused: GAMP-RIE stopped in an inconsistent state (layer 1): measured error 0.07193"
    assert pack_line(words.split(" "), sep=" ", width=40).replace("\n  ", " ") == words
    assert pack_line(["a", "b"], head="x: ", sep="; ", width=6) == "x: a;\n  b"


@pytest.mark.parametrize("parts, kwargs, error", [
    ([], {}, ValueError),
    ("abc", {}, ValueError),
    (["a", 1], {}, TypeError),
    (["a", "b"], {"sep": None}, TypeError),
    (["a"], {"head": 3}, TypeError),
    (["x" * (OUTPUT_WIDTH + 1)], {}, ValueError),
    (["a", "x" * (OUTPUT_WIDTH - 1)], {}, ValueError),
    (["a"], {"indent": OUTPUT_WIDTH}, ValueError),
    (["a"], {"width": 0}, ValueError),
])
def test_pack_line_bad_inputs_raise(parts, kwargs, error):
    with pytest.raises(error):
        pack_line(parts, **kwargs)


def test_mean_se_prints_the_standard_error_in_the_last_digit():
    """Four values 0.048, 0.049, 0.050, 0.051: mean 0.0495, s = 0.00129, s/2 = 0.00065, so ``0.0495(6)`` at
    four digits and ``0.04950(65)`` at five; one value prints alone, none as a dash."""
    v = [0.048, 0.049, 0.050, 0.051]
    assert mean_se(v) == "0.0495(6)"
    assert mean_se(np.array(v), digits=5) == "0.04950(65)"
    assert mean_se([0.25], digits=2) == "0.25"
    assert mean_se([]) == "-"


@pytest.mark.parametrize("digits", [-1, 13, 2.5])
def test_mean_se_refuses_digits_outside_0_to_12(digits):
    with pytest.raises((ValueError, TypeError), match="digits"):
        mean_se([1.0, 2.0], digits=digits)
