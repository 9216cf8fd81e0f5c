// Search excerpts without requests. Sphinx's search page fetches each result's page to cut its
// excerpt from, which a page opened from the file system (file://) may not do: its results came
// without excerpts. The build writes every page's text into search-pages.js (AimSearchPages: per
// page its blocks [anchor, parent block, own text], book/_ext/aim_search.py); here a request for
// one of those pages is answered with a small page rebuilt from them (each block a <section> with
// its anchor, inline math in <span class="math">), so the excerpt is cut as before, online or not.
(() => {
  const escape = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const withMath = (text) => escape(text).replace(/\\\((.*?)\\\)/g, '<span class="math">\\($1\\)</span>');

  // The page rebuilt from its blocks: a block's own text, then the blocks within it.
  const pageHtml = (blocks) => {
    const inside = blocks.map(() => []);
    const top = [];
    blocks.forEach(([, parent], i) => (parent < 0 ? top : inside[parent]).push(i));
    const render = (i) => `<section id="${escape(blocks[i][0])}">${withMath(blocks[i][2])} `
      + `${inside[i].map(render).join("")}</section>`;
    return `<!doctype html><html><body><main role="main">${top.map(render).join("")}</main></body></html>`;
  };

  // The page name a URL of this book names (``book/hardmax`` for .../book/hardmax.html), or null.
  const pageOf = (url) => {
    const root = new URL(document.documentElement.dataset.content_root ?? "./", document.baseURI).href;
    const href = new URL(url, document.baseURI).href.split("#")[0];
    return href.startsWith(root) && href.endsWith(".html") ? decodeURI(href.slice(root.length, -5)) : null;
  };

  const pages = window.AimSearchPages ?? {};
  const fetchPage = window.fetch.bind(window);
  window.fetch = (resource, options) => {
    const page = pageOf(resource instanceof Request ? resource.url : String(resource));   // a string or a URL
    if (page !== null && Object.hasOwn(pages, page)) {
      return Promise.resolve(new Response(pageHtml(pages[page]), { headers: { "Content-Type": "text/html" } }));
    }
    return fetchPage(resource, options);
  };
  window.AimSearchOffline = { pageHtml, pageOf };
})();
