// Search results as plain text. Sphinx's search page cuts each snippet from the text of the
// page's main element, which in this theme begins with the download menu and the page's table
// of contents; in that text math is its TeX source (\(\alpha\), \[ ... \]) and code cells
// show their source (plot labels such as "$\alpha$"). It places the snippet at a stemmed
// query word ("recoveri"), often not found, and then shows the top of the page. Section
// titles come from the search index, with math as TeX too. Here a snippet is cut from the
// article alone, without code cell sources, at the query word as typed or stemmed; inline
// math and titles become plain text (Greek letters and common symbols as Unicode, accents as
// combining characters over each letter they cover (\bar\tau as τ̄, \hat S as Ŝ; dropped, τ̄
// would read as τ), \frac{a}{b} as (a)/(b), other commands dropped) and a displayed
// equation an ellipsis.
(() => {
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", Gamma: "Γ", delta: "δ", Delta: "Δ", epsilon: "ε",
    varepsilon: "ε", zeta: "ζ", eta: "η", theta: "θ", Theta: "Θ", kappa: "κ", lambda: "λ",
    Lambda: "Λ", mu: "μ", nu: "ν", xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", Sigma: "Σ",
    tau: "τ", phi: "φ", varphi: "φ", Phi: "Φ", chi: "χ", psi: "ψ", Psi: "Ψ", omega: "ω",
    Omega: "Ω", ell: "ℓ", infty: "∞", partial: "∂", nabla: "∇", cdot: "·", times: "×",
    pm: "±", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈",
    sim: "∼", propto: "∝", to: "→", rightarrow: "→", mapsto: "↦", in: "∈", top: "⊤",
    sum: "Σ", prod: "∏", int: "∫", dots: "…", ldots: "…", cdots: "⋯", mid: "|",
  };

  // Accents and the combining character each one becomes.
  const ACCENTS = {
    hat: "\u0302", widehat: "\u0302", bar: "\u0304", overline: "\u0305", tilde: "\u0303",
    widetilde: "\u0303", mathring: "\u030A", dot: "\u0307", ddot: "\u0308", check: "\u030C",
    breve: "\u0306", vec: "\u20D7",
  };
  const ACCENTED = new RegExp(
    `\\\\(${Object.keys(ACCENTS).join("|")})(?![A-Za-z])\\s*(\\{[^{}]*\\}|\\\\[A-Za-z]+|[A-Za-z0-9])`, "g");

  // `\bar\tau` as τ̄: the accent's argument made plain, the accent over each of its letters.
  const accented = (text) => text.replace(ACCENTED, (_, accent, arg) =>
    [...plain(arg.replace(/^\{|\}$/g, ""))].map((c) => (/\s/.test(c) ? c : c + ACCENTS[accent])).join(""));

  const plain = (tex) => {
    let text = accented(tex.replace(/^\s*\\\(|\\\)\s*$/g, ""));
    for (let before = null; before !== text;) {
      before = text;
      text = text
        .replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
        .replace(/\\sqrt\s*\{([^{}]*)\}/g, "√($1)");
    }
    return text
      .replace(/\\([A-Za-z]+)(\s*)/g, (_, name, space) => (Object.hasOwn(SYMBOLS, name) ? SYMBOLS[name] + space : ""))
      .replace(/\\[,;:! ]/g, " ")
      .replace(/\\([{}_$%&#|])/g, "$1")
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ")
      .trim();
  };

  const plainHtml = (html) => {
    const doc = new DOMParser().parseFromString(html, "text/html");
    const article = doc.querySelector('[role="main"] article');
    if (article) doc.querySelector('[role="main"]').replaceChildren(article);
    doc.querySelectorAll(".cell_input").forEach((el) => el.remove());
    doc.querySelectorAll("div.math").forEach((el) => el.replaceWith(" … "));
    doc.querySelectorAll(".math").forEach((el) => el.replaceWith(plain(el.textContent)));
    return doc.documentElement.outerHTML;
  };

  const plainIndex = (index) => {
    index.titles = index.titles.map(plain);
    const titles = {};
    for (const [title, places] of Object.entries(index.alltitles)) {
      titles[plain(title)] = (titles[plain(title)] ?? []).concat(places);
    }
    index.alltitles = titles;
    return index;
  };

  const patch = () => {
    if (typeof Search === "undefined" || Search.plainMath) return;
    Search.plainMath = true;
    const typed = (new URLSearchParams(window.location.search).get("q") ?? "").split(/\s+/);
    const summary = Search.makeSearchSummary;
    Search.makeSearchSummary = (html, keywords, anchor) =>
      summary(plainHtml(html), new Set([...keywords, ...typed.filter(Boolean)]), anchor);
    const setIndex = Search.setIndex;
    Search.setIndex = (index) => setIndex(plainIndex(index));
    if (Search._index) plainIndex(Search._index);
  };

  window.AimPlainMath = { plain };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", patch);
  else patch();
})();
