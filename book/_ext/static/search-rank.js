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
//    title adds 30 times the share of the title's words it makes up, or else, in section
//    headings, 20 times that share summed over them ("State evolution" 20, "Softmax state
//    evolution" 13), at most 30 (rankPages);
//  * a page's result links to its section whose heading holds the whole query, or else all
//    query words (none: the page itself), and its snippet is cut from that section (or the
//    page) at the first occurrence of the whole query, or else where most query words stand
//    within a few lines (snippetStart);
//  * results of equal score come as entries of the reference named by the query (below), pages
//    of the book, pages of the reference, each in the order of how often their text says the
//    whole query (the pages' texts, AimSearchPages, written by the build: book/_ext/aim_search.py);
//  * a page whose title holds every query word is about it: its SECTIONS section(s) whose text
//    says the query most often (MIN_SAID times at least) follow it as results of their own
//    (sectionResults; not for pages of the reference, whose entries are found by name);
//  * an entry of the library reference whose name holds every query word ("hardmax_polytope"
//    for "hardmax") is a result too, scored as a section heading holding those words, without
//    the whole query's share (objectResults).
// The functions are plain (no page needed): tests/test_browser.py runs them on a small index.
(() => {
  const TITLE = 15, HEADING = 10, TEXT = 5, PART = 2, PHRASE_TITLE = 30, PHRASE_HEADING = 20;
  const SPAN = 240, BEFORE = 60, NEAR = 160, SECTIONS = 1, MIN_SAID = 5;

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

  // The pages of the reference: those that document entries.
  const documentedFiles = (index) => new Set(Object.values(index.objects ?? {}).flatMap((es) => es.map((e) => e[0])));

  // The share of a title's words that the whole query (two words or more) makes up, 0 if it is not there.
  const shareOf = (typed) => {
    const phrase = typed.length > 1 ? typed.map((w) => w.toLowerCase()).join(" ") : null;
    return (title) => {
      const said = words(title);
      return phrase !== null && ` ${said.join(" ")} `.includes(` ${phrase} `) ? typed.length / said.length : 0;
    };
  };

  // The whole query as a regular expression: its words apart by spaces or hyphens.
  const phraseOf = (typed, flags) => {
    const escape = (w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return typed.length ? new RegExp(typed.map(escape).join("[\\s\\-\u2010-\u2013]+"), flags) : null;
  };

  // How often each block of a page's text (AimSearchPages) says the whole query, its blocks within it
  // included: {anchor: count}, and the page's count under "".
  const saidIn = (blocks, typed) => {
    const phrase = phraseOf(typed, "gi");
    const said = blocks.map(([, , text]) => (phrase ? (text.match(phrase) ?? []).length : 0));
    for (let i = blocks.length - 1; i >= 0; i--) if (blocks[i][1] >= 0) said[blocks[i][1]] += said[i];
    const counts = { "": blocks.reduce((n, b, i) => n + (b[1] < 0 ? said[i] : 0), 0) };
    blocks.forEach(([anchor], i) => { counts[anchor] ??= said[i]; });
    return counts;
  };

  // The ranked pages: [{file, score, said, heading: {title, anchor} or null}].
  // `terms`: the query's stemmed words; `typed`: its words as typed; `stem`: the stemmer;
  // `texts`: the pages' texts by page name (AimSearchPages), or none.
  const rankPages = (index, terms, typed, stem, texts = {}) => {
    const stems = (text) => new Set(words(text).map(stem));
    const share = shareOf(typed);
    const documented = documentedFiles(index);
    const inText = new Map(terms.map((t) => [t, textFiles(index, t)]));
    const results = [];
    for (const page of pagesOf(index)) {
      const titleStems = stems(page.title);
      const headings = page.headings.map((h) => ({ ...h, stems: stems(h.title), share: share(h.title) }));
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
      const headingShare = headings.reduce((sum, h) => sum + h.share, 0);
      score += Math.round(share(page.title) ? PHRASE_TITLE * share(page.title)
        : Math.min(PHRASE_TITLE, PHRASE_HEADING * headingShare));
      const weight = (h) => (h.share ? terms.length + 1 + h.share : 0) + terms.filter((t) => h.stems.has(t)).length;
      const best = headings.reduce((a, h) => (weight(h) > (a ? weight(a) : terms.length - 1) ? h : a), null);
      const said = saidIn(texts[index.docnames[page.file]] ?? [], typed);
      const heading = best && { title: best.title, anchor: best.anchor };
      const result = { file: page.file, score, said: said[""], heading };
      results.push(result);
      if (terms.every((t) => titleStems.has(t)) && !documented.has(page.file)) {
        results.push(...sectionResults(result, headings, said));
      }
    }
    return results;
  };

  // The SECTIONS sections of a page about the query that say it most often (MIN_SAID times at least),
  // the linked one left out, as results just below the page's.
  const sectionResults = (page, headings, said) => headings
    .filter((h) => h.anchor !== page.heading?.anchor && (said[h.anchor] ?? 0) >= MIN_SAID)
    .sort((a, b) => said[b.anchor] - said[a.anchor])
    .slice(0, SECTIONS)
    .map((h, i) => ({ file: page.file, score: page.score - 1 - i, said: said[h.anchor],
                      heading: { title: h.title, anchor: h.anchor } }));

  // Entries of the reference whose name holds every query word: [{file, score, said, object: {name, anchor}}].
  const objectResults = (index, terms, stem) => {
    const results = [];
    for (const [prefix, entries] of Object.entries(index.objects ?? {})) {
      for (const [file, type, , anchor, name] of entries) {
        const named = new Set(words(name).map(stem));
        if (!terms.length || !terms.every((t) => named.has(t))) continue;
        const full = prefix ? `${prefix}.${name}` : name;
        const target = anchor === "" ? full : anchor === "-" ? `${index.objnames[type][1]}-${full}` : anchor;
        results.push({ file, score: HEADING * terms.length, said: 0,
                       object: { name: full, anchor: target } });
      }
    }
    return results;
  };

  // Every result, best first: by score, then entries named by the query, pages of the book and pages
  // of the reference (those that document entries) in that order, then by how often the text says
  // the query, then by title.
  const rank = (index, terms, typed, stem, texts = {}) => {
    const documented = documentedFiles(index);
    const title = (r) => (r.object ? r.object.name : index.titles[r.file]);
    const kind = (r) => (r.object ? 0 : documented.has(r.file) ? 2 : 1);
    return [...rankPages(index, terms, typed, stem, texts), ...objectResults(index, terms, stem)]
      .sort((a, b) => b.score - a.score || kind(a) - kind(b) || b.said - a.said || title(a).localeCompare(title(b)));
  };

  // Where a snippet of `text` starts: BEFORE characters ahead of the whole query if it is there
  // (its words apart by spaces or hyphens), else of the first place where the most of `keys`
  // (one per query word) stand within NEAR characters.
  const snippetStart = (text, typed, keys) => {
    const lower = text.toLowerCase();
    const phrase = phraseOf(typed, "i");
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
      const ranked = rank(index, [...searchTerms], words(query).filter((w) => !stopwords.includes(w)),
                          (w) => stemmer.stemWord(w), window.AimSearchPages);
      const pages = new Set(ranked.map((r) => index.docnames[r.file]));
      const kept = others.filter((r) => !pages.has(r[0]));
      const titled = (r) => (r.object ? r.object.name : r.heading ? `${index.titles[r.file]} > ${r.heading.title}`
        : index.titles[r.file]);
      const anchor = (r) => (r.object ? `#${r.object.anchor}` : r.heading ? `#${r.heading.anchor}` : "");
      const ours = ranked.map((r) => [index.docnames[r.file], titled(r), anchor(r), null, r.score,
                                      index.filenames[r.file]]);
      return [...kept, ...ours.reverse()];   // Sphinx shows the list from its end
    };
    Search.makeSearchSummary = (html, keywords, anchor) => {
      const stemmer = new Stemmer();
      const selector = anchor && `#${CSS.escape(anchor.slice(1))}`;   // ids hold dots: "#aimlib.amp"
      return summary(Search.htmlToText(html, selector), typedWords(), keywords, (w) => stemmer.stemWord(w));
    };
  };

  window.AimSearchRank = { rank, rankPages, objectResults, snippetStart, keyOf };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", patch);
  else patch();
})();
