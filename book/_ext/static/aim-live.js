/* Live mode of the built book (book/_ext/aim_live.py adds this script to pages with code cells).
 *
 * On load the script only changes the page: a "Live" bar above the first code cell and, at each
 * panel (a cell whose output holds an ipywidgets view), a notice that the panel is a snapshot
 * and how to make it live. It requests nothing until "Live" is pressed; then it
 *   1. reads <site>/_live/config.json, which only the live server (`make live`,
 *      book/_ext/live_server.py) answers: the kernel server's URL and token;
 *   2. loads Thebe 0.9 from _static/thebe (vendored; it bundles JupyterLab's ipywidgets 8
 *      manager) and turns the page's code cells into cells of a kernel session;
 *   3. runs the cells of the page's opening section (its imports) and the panel cells, so
 *      that the panels are drawn by the kernel; every other cell gets a "run" button.
 * Thebe fetches require.js from a CDN before its first widget, even for the built-in ones;
 * that one URL is answered with the vendored copy (_static/widgets/require.js).
 */
(function () {
  "use strict";
  var STATIC = document.currentScript.src.replace(/[^/]*$/, "");
  var CONFIG_URL = new URL("../_live/config.json", STATIC).href;
  var THEBE_REQUIREJS = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js";
  var WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';
  var HOW = "run <code>make live</code> in the repository and open the book at the address it " +
    "prints, then press <b>Live</b>; or open the chapter as a notebook (<code>make lab</code>) " +
    "or the playground as an app (<code>make app</code>).";
  var state = { started: false, status: [], buttons: [] };

  function codeCells() {
    return Array.prototype.filter.call(document.querySelectorAll("article div.cell"), function (c) {
      return c.querySelector(".cell_input pre");
    });
  }

  function isPanel(cell) {
    return !!cell.querySelector(".cell_output " + WIDGET_VIEW);
  }

  function liveButton() {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "aim-live-button btn btn-sm";
    b.textContent = "Live";
    b.title = "Connect this page's code cells and panels to a local kernel (make live)";
    b.addEventListener("click", goLive);
    state.buttons.push(b);
    return b;
  }

  function bar(cls, html) {
    var div = document.createElement("div");
    div.className = cls;
    div.appendChild(liveButton());
    var text = document.createElement("span");
    text.className = "aim-live-status";
    text.innerHTML = html;
    state.status.push(text);
    div.appendChild(text);
    return div;
  }

  function say(html, level) {
    state.status.forEach(function (s) {
      s.innerHTML = html;
      s.parentNode.setAttribute("data-state", level);
    });
  }

  function setup() {
    var cells = codeCells();
    if (!cells.length) return;
    var panels = cells.filter(isPanel);
    var intro = panels.length
      ? "The panels on this page are snapshots: their controls move but do not recompute. "
      : "The code cells of this page can run in a local kernel. ";
    cells[0].parentNode.insertBefore(bar("aim-live-bar", intro + "To make them live, " + HOW),
                                     cells[0]);
    panels.forEach(function (cell) {
      var note = bar("aim-live-notice",
        "<b>Snapshot.</b> This panel shows the figure saved when the book was built; moving " +
        "its controls changes nothing. To make it live, " + HOW);
      cell.parentNode.insertBefore(note, cell);
    });
  }

  function loadThebe() {
    var fetch0 = window.fetch;
    window.fetch = function (input, init) {
      return fetch0.call(this, input === THEBE_REQUIREJS ? STATIC + "widgets/require.js" : input, init);
    };
    var css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = STATIC + "thebe/thebe.css";
    document.head.appendChild(css);
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = STATIC + "thebe/index.js";
      s.onload = function () { resolve(window.thebe); };
      s.onerror = function () { reject(new Error("could not load " + s.src)); };
      document.head.appendChild(s);
    });
  }

  /* Mark the source and output of every code cell for Thebe, which pairs them in order:
   * a cell without output gets an empty output element. */
  function markCells(cells) {
    cells.forEach(function (cell) {
      cell.querySelector(".cell_input pre").setAttribute("data-aim-live-source", "");
      var out = cell.querySelector(".cell_output");
      if (!out) {
        out = document.createElement("div");
        out.className = "cell_output docutils container";
        cell.appendChild(out);
      }
      out.setAttribute("data-aim-live-output", "");
    });
  }

  function pageName() {
    var name = location.pathname.replace(/^.*\//, "").replace(/\.html$/, "") || "index";
    return name.replace(/[^A-Za-z0-9-]/g, "-") + "-" + Math.random().toString(36).slice(2, 8);
  }

  async function connect(config) {
    var cells = codeCells();
    var top = document.querySelector("article section");
    var toRun = cells.map(function (c, i) {
      return (isPanel(c) || c.closest("section") === top) ? i : -1;
    }).filter(function (i) { return i >= 0; });
    markCells(cells);
    say("Loading the kernel client&hellip;", "busy");
    var thebe = await loadThebe();
    say("Starting a kernel on " + config.baseUrl + "&hellip;", "busy");
    var live = await thebe.bootstrap({
      useBinder: false, useJupyterLite: false, requestKernel: true,
      mountStatusWidget: false, mountActivateWidget: false,
      mountRunAllButton: false, mountRestartAllButton: false,
      selector: "[data-aim-live-source]", outputSelector: "[data-aim-live-output]",
      mathjaxUrl: "", mathjaxConfig: "",
      serverSettings: { baseUrl: config.baseUrl, wsUrl: config.wsUrl, token: config.token,
                        appendToken: true },
      kernelOptions: { kernelName: config.kernelName, path: "/" + pageName() + ".ipynb" },
    });
    if (!live.session) throw new Error("the kernel server gave no session");
    var notebook = live.notebook;
    for (var k = 0; k < toRun.length; k++) {
      say("Running the cells the panels need (" + (k + 1) + " of " + toRun.length + ")&hellip;", "busy");
      var cell = notebook.cells[toRun[k]];
      await cell.execute(cell.source);
    }
    document.documentElement.setAttribute("data-aim-live", "ready");
    say("<b>Live.</b> The panels recompute in the kernel of <code>make live</code>; every code " +
        "cell can be edited and run (Shift-Enter or its <i>run</i> button).", "ready");
  }

  async function goLive() {
    if (state.started) return;
    state.started = true;
    state.buttons.forEach(function (b) { b.disabled = true; });
    say("Looking for the live server&hellip;", "busy");
    var config = null;
    try {
      var response = await fetch(CONFIG_URL, { cache: "no-store" });
      if (response.ok) config = await response.json();
    } catch (err) {
      config = null;
    }
    if (!config) {
      state.started = false;
      state.buttons.forEach(function (b) { b.disabled = false; });
      say("No live server answered here. To make the panels live, " + HOW, "error");
      return;
    }
    try {
      await connect(config);
    } catch (err) {
      document.documentElement.setAttribute("data-aim-live", "failed");
      say("Could not go live: " + String(err && err.message ? err.message : err).replace(/</g, "&lt;") +
          ". Is <code>make live</code> still running? Reload the page to try again.", "error");
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
