/* Live mode of the built book (book/_ext/aim_live.py adds this script to pages with code cells).
 *
 * On load the script changes the page: a "Live" bar above the first code cell and, at each
 * panel (a cell whose output holds an ipywidgets view), a notice that the panel is a snapshot
 * and how to make it live. The panels' controls are drawn disabled: the widget state saved at
 * build time (read by the html-manager on window "load", after this script ran) has every
 * "disabled" set to true, since nothing recomputes when a saved control moves. Live mode
 * draws the kernel's own widgets in their place, enabled. If the page was opened at the live address that `make live` prints
 * (book/_ext/live_server.py), whose fragment is #live=<one-time secret>, the script removes the
 * fragment from the address bar and exchanges the secret at <site>/_live/session for the
 * live server's session key, kept in this origin's localStorage (no other port can read it);
 * otherwise it requests nothing until "Live" is pressed. Then it
 *   1. reads <site>/_live/config.json, which only the live server answers, and only to a
 *      request carrying the session key in its X-AIM-Live-Session header: the kernel
 *      server's URL and token;
 *   2. loads Thebe 0.9 from _static/thebe (vendored; it bundles JupyterLab's ipywidgets 8
 *      manager) and turns the page's code cells into cells of a kernel session;
 *   3. runs the cells of the page's opening section (its imports) and the panel cells, so
 *      that the panels are drawn by the kernel; every other cell gets a "run" button.
 * When the page goes away (pagehide) its kernel is shut down.
 * Thebe fetches require.js from a CDN before its first widget, even for the built-in ones;
 * that one URL is answered with the vendored copy (_static/widgets/require.js).
 */
(function () {
  "use strict";
  var STATIC = document.currentScript.src.replace(/[^/]*$/, "");
  var CONFIG_URL = new URL("../_live/config.json", STATIC).href;
  var SESSION_URL = new URL("../_live/session", STATIC).href;
  var SESSION_KEY = "aim-live-session";   /* localStorage item of this origin */
  var THEBE_REQUIREJS = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js";
  var WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';
  var WIDGET_STATE = 'script[type="application/vnd.jupyter.widget-state+json"]';
  var HOW = "run <code>make live</code> in the repository and open the book at the address it " +
    "prints, then press <b>Live</b>; or open the chapter as a notebook (<code>make lab</code>) " +
    "or the playground as an app (<code>make app</code>).";
  var state = { started: false, status: [], buttons: [], session: null, kernelGone: false };

  /* The live address's one-time secret, if the page was opened there: taken out of the address
   * bar and exchanged for the session key, which is stored (a promise that always resolves). */
  function redeemSecret() {
    var match = /^#live=([A-Za-z0-9_-]+)$/.exec(location.hash);
    if (!match) return Promise.resolve();
    history.replaceState(history.state, "", location.pathname + location.search);
    return fetch(SESSION_URL, { method: "POST", body: match[1], credentials: "omit",
                                headers: { "Content-Type": "text/plain" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (answer) { if (answer) localStorage.setItem(SESSION_KEY, answer.session); })
      .catch(function () { return null; });
  }

  /* Shut the kernel down when the page goes away; reload the page if it comes back from the
   * back-forward cache without it. */
  function shutDownOnLeave(config, kernelId) {
    window.addEventListener("pagehide", function () {
      state.kernelGone = true;
      fetch(config.baseUrl + "api/kernels/" + encodeURIComponent(kernelId), {
        method: "DELETE", keepalive: true, headers: { Authorization: "token " + config.token } });
    });
    window.addEventListener("pageshow", function (event) {
      if (event.persisted && state.kernelGone) location.reload();
    });
  }

  /* Every saved widget model that has a "disabled" attribute (sliders, buttons, fields,
   * drop-downs) is saved again with it set, before the html-manager renders the panels. */
  function disableSavedControls() {
    Array.prototype.forEach.call(document.querySelectorAll(WIDGET_STATE), function (script) {
      var saved;
      try {
        saved = JSON.parse(script.textContent);
      } catch (err) {
        return;
      }
      var models = saved.state || {};
      Object.keys(models).forEach(function (id) {
        var model = models[id].state;
        if (model && Object.prototype.hasOwnProperty.call(model, "disabled")) model.disabled = true;
      });
      script.textContent = JSON.stringify(saved);
    });
  }

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
      ? "The panels on this page are snapshots: their controls are disabled, nothing recomputes. "
      : "The code cells of this page can run in a local kernel. ";
    cells[0].parentNode.insertBefore(bar("aim-live-bar", intro + "To make them live, " + HOW),
                                     cells[0]);
    panels.forEach(function (cell) {
      var note = bar("aim-live-notice",
        "<b>Snapshot.</b> This panel shows the figure saved when the book was built; its " +
        "controls are disabled. To make it live, " + HOW);
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
    shutDownOnLeave(config, live.session.kernel.id);
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
    var config = null, refused = false;
    try {
      await state.session;
      var response = await fetch(CONFIG_URL, { cache: "no-store", credentials: "omit",
        headers: { "X-AIM-Live-Session": localStorage.getItem(SESSION_KEY) || "" } });
      refused = response.status === 403;
      if (response.ok) config = await response.json();
    } catch (err) {
      config = null;
    }
    if (!config) {
      state.started = false;
      state.buttons.forEach(function (b) { b.disabled = false; });
      say(refused
        ? "The live server answers only the browser that opened the address <code>make live</code> " +
          "printed (each address works once): open that address, or restart <code>make live</code> " +
          "for a new one."
        : "No live server answered here. To make the panels live, " + HOW, "error");
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

  state.session = redeemSecret();
  disableSavedControls();   /* the saved state stands in the page's head, above this script */
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { disableSavedControls(); setup(); });
  } else {
    setup();
  }
})();
