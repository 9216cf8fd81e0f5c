"""Bibliography labels that read like the author-year citations in the text.

With ``bibtex_reference_style: author_year`` sphinxcontrib-bibtex cites as
"[Vaswani et al., 2017]", but its default bibliography style labels the entry
"[VSP+17]".  The pybtex style ``aim_author_year`` registered here is the
"alpha" style (entries sorted by author, year, title) whose labels are made by
the same template that sphinxcontrib-bibtex uses for the citation: the last
names of the authors (editors, else the title) with "et al." from three on,
a comma, and the year.
"""
from types import SimpleNamespace

from pybtex.plugin import register_plugin
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import join
from sphinxcontrib.bibtex.style.referencing import PersonStyle
from sphinxcontrib.bibtex.style.template import year

NAME = "aim_author_year"
_PERSON = PersonStyle()
_LABEL = join(sep=", ")[_PERSON.author_or_editor_or_title(full=False), year]


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels "Author, year", "A and B, year" or "A et al., year"."""

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            data = {"entry": entry, "style": SimpleNamespace(person=_PERSON)}
            yield _LABEL.format_data(data).render_as("text")


class AuthorYearStyle(AlphaStyle):
    """The alpha style with author-year labels."""

    default_label_style = NAME


def setup(app):
    register_plugin("pybtex.style.labels", NAME, AuthorYearLabelStyle)
    register_plugin("pybtex.style.formatting", NAME, AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
