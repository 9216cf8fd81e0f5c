// Search results ranked by where the query's words stand, each with a snippet at the hit.
//
// Sphinx's search page gives a page the score of its best single query word (15 for a word
// in any title of the page, 5 in its text), so a page that mentions both words of "weak
// recovery" here and there ties with the page that has a section on it; its snippet starts
// at the first occurrence of the last query word, often in an unrelated sentence. Here
//  * a page is a result when every query word stands in it (titles or text; a word that no
//    page has exactly may stand inside a longer one, as in Sphinx), and its score adds, per
//    word, 15 when it stands in the page's title, 10 in a section heading, 5 in the text
//    alone (2 as part of a longer word); the whole query (two words or more) in the page
//    title adds 30, in a section heading 20 (rankPages);
//  * a page's result links to its section whose heading holds the whole query, or else all
//    query words (none: the page itself), and its snippet is cut from that section (or the
//    page) at the first occurrence of the whole query, or else where most query words stand
//    within a few lines (snippetStart).
// The functions are plain (no page needed): tests/test_browser.py runs them on a small index.
(() => {
  const TITLE = 15, HEADING = 10, TEXT = 5, PART = 2, PHRASE_TITLE = 30, PHRASE_HEADING = 20;
  const SPAN = 240, BEFORE = 60, NEAR = 160;

  const words = (text) => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  const filesOf = (entry) => (entry === undefined ? [] : Array.isArray(entry) ? entry : [entry]);

  // Pages of the index as {file, title, headings: [{title, anchor}]} (the page title excluded).
  const pagesOf = (index) => {
    const pages = index.titles.map((title, file) => ({ file, title, headings: [] }));
    for (const [title, places] of Object.entries(index.alltitles)) {
      for (const [file, anchor] of places) {
        if (anchor !== null && pages[file]) pages[file].headings.push({ title, anchor });
      }
    }
    return pages;
  };

  // Files whose text holds `term` exactly, or (when no page has it exactly) inside a longer word.
  const textFiles = (index, term) => {
    const exact = new Set([...filesOf(index.terms[term]), ...filesOf(index.titleterms[term])]);
    const part = new Set();
    if (term.length > 2 && !index.terms[term] && !index.titleterms[term]) {
      for (const [key, entry] of Object.entries(index.terms)) {
        if (key.includes(term)) filesOf(entry).forEach((f) => part.add(f));
      }
    }
    return { exact, part };
  };

  // The ranked results: [{file, score, heading: {title, anchor} or null}], best first.
  // `terms`: the query's stemmed words; `typed`: its words as typed; `stem`: the stemmer.
  const rankPages = (index, terms, typed, stem) => {
    const stems = (text) => new Set(words(text).map(stem));
    const phrase = typed.length > 1 ? typed.map((w) => w.toLowerCase()).join(" ") : null;
    const hasPhrase = (title) => phrase !== null && ` ${words(title).join(" ")} `.includes(` ${phrase} `);
    const inText = new Map(terms.map((t) => [t, textFiles(index, t)]));
    const results = [];
    for (const page of pagesOf(index)) {
      const titleStems = stems(page.title);
      const headings = page.headings.map((h) => ({ ...h, stems: stems(h.title), phrase: hasPhrase(h.title) }));
      let score = 0, missing = false;
      for (const t of terms) {
        const found = inText.get(t);
        if (titleStems.has(t)) score += TITLE;
        else if (headings.some((h) => h.stems.has(t))) score += HEADING;
        else if (found.exact.has(page.file)) score += TEXT;
        else if (found.part.has(page.file)) score += PART;
        else missing = true;
      }
      if (missing || !terms.length) continue;
      if (hasPhrase(page.title)) score += PHRASE_TITLE;
      else if (headings.some((h) => h.phrase)) score += PHRASE_HEADING;
      const weight = (h) => (h.phrase ? terms.length + 1 : 0) + terms.filter((t) => h.stems.has(t)).length;
      const best = headings.reduce((a, h) => (weight(h) > (a ? weight(a) : terms.length - 1) ? h : a), null);
      results.push({ file: page.file, score, heading: best && { title: best.title, anchor: best.anchor } });
    }
    return results.sort((a, b) => b.score - a.score || index.titles[a.file].localeCompare(index.titles[b.file]));
  };

  // Where a snippet of `text` starts: BEFORE characters ahead of the whole query if it is there
  // (its words apart by spaces or hyphens), else of the first place where the most of `keys`
  // (one per query word) stand within NEAR characters.
  const snippetStart = (text, typed, keys) => {
    const lower = text.toLowerCase();
    const escape = (w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const phrase = typed.length ? new RegExp(typed.map(escape).join("[\\s\\-\u2010-\u2013]+"), "i") : null;
    let at = phrase ? text.search(phrase) : -1;
    if (at < 0) {
      const hits = [];
      keys.forEach((k) => { for (let i = lower.indexOf(k); i >= 0; i = lower.indexOf(k, i + 1)) hits.push([i, k]); });
      hits.sort((a, b) => a[0] - b[0]);
      let bestCount = 0;
      for (const [i] of hits) {
        const near = new Set(hits.filter(([j]) => j >= i && j < i + NEAR).map(([, k]) => k)).size;
        if (near > bestCount) [bestCount, at] = [near, i];
      }
    }
    if (at <= BEFORE) return 0;
    const space = text.indexOf(" ", at - BEFORE);
    return space >= 0 && space < at ? space + 1 : at - BEFORE;
  };

  // One key per query word: what the word and its stem share ("recover" for "recovery").
  const keyOf = (word, stem) => {
    let n = 0;
    while (n < word.length && word[n] === stem[n]) n++;
    return n >= 3 ? word.slice(0, n) : word;
  };

  const summary = (text, typed, keywords, stem) => {
    const flat = text.replace(/\s+/g, " ").trim();
    if (!flat) return null;
    const keys = typed.length ? typed.map((w) => keyOf(w.toLowerCase(), stem(w.toLowerCase())))
      : [...keywords].map((k) => k.toLowerCase());
    const start = snippetStart(flat, typed, [...new Set(keys)]);
    const p = document.createElement("p");
    p.classList.add("context");
    p.textContent = (start ? "..." : "") + flat.substr(start, SPAN).trim() + (start + SPAN < flat.length ? "..." : "");
    return p;
  };

  const typedWords = () => (new URLSearchParams(window.location.search).get("q") ?? "")
    .split(/\s+/).filter((w) => w && !w.startsWith("-") && !(window.stopwords ?? []).includes(w.toLowerCase()));

  const patch = () => {
    if (typeof Search === "undefined" || Search.aimRanked) return;
    Search.aimRanked = true;
    const perform = Search._performSearch;
    Search._performSearch = (query, searchTerms, excludedTerms, highlightTerms, objectTerms) => {
      const others = perform(query, searchTerms, excludedTerms, highlightTerms, objectTerms);
      if (excludedTerms.size) return others;
      const stemmer = new Stemmer();
      const index = Search._index;
      const ranked = rankPages(index, [...searchTerms], words(query).filter((w) => !stopwords.includes(w)),
                               (w) => stemmer.stemWord(w));
      const pages = new Set(ranked.map((r) => index.docnames[r.file]));
      const kept = others.filter((r) => !pages.has(r[0]));
      const ours = ranked.map((r) => [
        index.docnames[r.file],
        r.heading ? `${index.titles[r.file]} > ${r.heading.title}` : index.titles[r.file],
        r.heading ? `#${r.heading.anchor}` : "", null, r.score, index.filenames[r.file]]);
      return [...kept, ...ours.reverse()];   // Sphinx shows the list from its end
    };
    Search.makeSearchSummary = (html, keywords, anchor) => {
      const stemmer = new Stemmer();
      return summary(Search.htmlToText(html, anchor), typedWords(), keywords, (w) => stemmer.stemWord(w));
    };
  };

  window.AimSearchRank = { rankPages, snippetStart, keyOf };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", patch);
  else patch();
})();
