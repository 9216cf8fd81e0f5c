"""The whole book as one PDF (``make pdf``): the built pages in the order of ``_toc.yml``, printed by Chromium.

The built HTML is read, not rebuilt.  ``print-book.html``, written at the root
of the built HTML (every page's relative links and images rewritten for it),
holds the head of the first page with panels (the theme's
stylesheets, MathJax, the offline widget manager, the print stylesheet
``static/aim-print.css``)
with the saved widget state of every page merged into one, then the article of
each page in turn, each from a new sheet.  The system Chromium prints it
headless (``--print-to-pdf``) from its ``file://`` address, offline, after giving
MathJax and the widgets time to draw (``--virtual-time-budget``), with the
headings as the PDF's outline (bookmarks).  The book opens with a title page and
its contents, and holds every page of ``_toc.yml``, the library reference's too.

``python book/_ext/book_pdf.py --html _build/html --out _build/aim-book.pdf``
"""
from __future__ import annotations

import argparse
import json
import posixpath
import shutil
import subprocess
from html import escape
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[2]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                 "--generate-pdf-document-outline", "--disable-background-networking", "--no-first-run",
                 "--virtual-time-budget=120000"]


def toc_pages(root: Path = ROOT) -> list[str]:
    """The book's pages in reading order (``_toc.yml``: its root, then every chapter and its sections,
    the library reference's included), without suffix."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())

    def walk(entries) -> list[str]:
        return [name for e in entries for name in [e["file"], *walk(e.get("sections", []))]]

    return [toc["root"], *(name for part in toc.get("parts", []) for name in walk(part["chapters"]))]


def chapter_id(name: str) -> str:
    """The ``id`` of page ``name``'s section in the printed book, which its entry in the contents links to."""
    return "aim-print-" + name.replace("/", "-")


def front_matter(title: str, author: str, entries) -> str:
    """A title page and a contents page: ``entries`` are ``(page name, chapter title)`` in reading order."""
    rows = "".join(f'<li><a href="#{chapter_id(name)}">{escape(heading)}</a></li>' for name, heading in entries)
    return (f'<section class="aim-print-front"><h1 class="aim-print-title">{escape(title)}</h1>'
            f'<p class="aim-print-author">{escape(author)}</p></section>'
            f'<section class="aim-print-front aim-print-contents" style="break-before: page">'
            f"<h2>Contents</h2><ol>{rows}</ol></section>")


def rebase(tree, folder: str) -> None:
    """Rewrite the relative ``src``/``href`` addresses in ``tree`` from its page's ``folder`` to the root."""
    for tag in tree.find_all(lambda t: t.has_attr("src") or t.has_attr("href")):
        for attr in ("src", "href"):
            url = tag.get(attr)
            if url and not url.startswith(("#", "/")) and not urlsplit(url).scheme:
                tag[attr] = posixpath.normpath(posixpath.join(folder, url)) + ("/" if url.endswith("/") else "")


def print_page(html: Path, pages: list[str], root: Path = ROOT) -> str:
    """One HTML document at the root of ``html``: a head, all pages' widget state merged, a title page and
    contents (the book's title and author from ``_config.yml``), then the articles in order.

    Relative addresses are rewritten for the root (:func:`rebase`).  Each article is a section with
    the ``id`` of :func:`chapter_id`, and its title (its first ``h1``) is an entry of the contents.
    """
    config = yaml.safe_load((root / "_config.yml").read_text())
    soups = [BeautifulSoup((html / f"{name}.html").read_text(), "html.parser") for name in pages]
    for name, soup in zip(pages, soups):
        rebase(soup, posixpath.dirname(name))
    # the head of the first page with panels: only those load the widget manager
    head = next((s.head for s in soups if s.head.find("script", type=WIDGET_STATE)), soups[0].head)
    if head.title is not None and soups[0].head.title is not None:
        head.title.string = soups[0].head.title.get_text()
    merged = {"state": {}, "version_major": 2, "version_minor": 0}
    chapters, entries = [], []
    for name, soup in zip(pages, soups):
        for script in soup.find_all("script", type=WIDGET_STATE):
            saved = json.loads(script.string)
            merged["state"].update(saved["state"])
            merged["version_major"], merged["version_minor"] = saved["version_major"], saved["version_minor"]
        article = soup.find("article")
        if article is None:
            raise ValueError(f"{name}.html has no <article>")
        heading = article.find("h1")
        entries.append((name, heading.get_text(" ", strip=True).rstrip("#¶ ") if heading else name))
        chapters.append(f'<section class="aim-print-chapter" id="{chapter_id(name)}" style="break-before: page">'
                        f"{article.decode_contents()}</section>")
    for script in head.find_all("script", type=WIDGET_STATE):
        script.decompose()
    state = json.dumps(merged).replace("</", "<\\/")
    return (f'<!DOCTYPE html>\n<html lang="en">{head.decode().replace("</head>", "")}'
            f'<script type="{WIDGET_STATE}">{state}</script></head>\n<body>'
            '<div class="bd-container"><div class="bd-main"><div class="bd-content">'
            '<div class="bd-article-container"><article class="bd-article" role="main">'
            + front_matter(config["title"], config["author"], entries)
            + "\n".join(chapters) + "</article></div></div></div></div></body></html>\n")


def main(argv=None) -> None:
    """Write ``print-book.html`` at the root of ``--html`` and print it to ``--out`` with Chromium."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="the built HTML")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "aim-book.pdf", help="the PDF to write")
    parser.add_argument("--root", type=Path, default=ROOT, help="the book's sources (its _toc.yml)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--pages", nargs="+", default=None, help="these pages only (default: every page)")
    args = parser.parse_args(argv)
    pages = args.pages or toc_pages(args.root)
    target = args.html / "print-book.html"
    target.write_text(print_page(args.html, pages, args.root))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.chromium, *CHROMIUM_ARGS, f"--print-to-pdf={args.out.resolve()}",
                    target.resolve().as_uri()], check=True, capture_output=True, timeout=900)
    if not args.out.is_file() or args.out.stat().st_size == 0:
        raise RuntimeError(f"Chromium wrote no PDF at {args.out}")
    print(f"{len(pages)} pages of the book printed to {args.out}")


if __name__ == "__main__":
    main()
