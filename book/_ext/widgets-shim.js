/* Offline ipywidgets in the static book (copied to _static/widgets/shim.js by `make vendor`).
 *
 * Loaded after require.js and before @jupyter-widgets/html-manager's embed-amd.js
 * (see `nb_ipywidgets_js` in _config.yml).
 *
 * 1. Fonts: the html-manager bundles locate their font files next to the URL
 *    RequireJS gives the module "@jupyter-widgets/base"; by default that is the
 *    page's own folder (and "@jupyter-widgets/html-manager/dist/libembed-amd"
 *    looks in a dist/ subfolder of it).  Map both to the folder of this script
 *    (_static/widgets/), where the fonts are vendored.
 * 2. MathJax: ipywidgets typesets labels with MathJax 2's MathJax.Hub.Queue;
 *    the book loads MathJax 3.  On window "load" (registered before the
 *    html-manager's own listener, which renders the widgets) add a small
 *    MathJax.Hub.Queue that calls MathJax 3's typesetPromise.
 */
(function () {
  "use strict";
  var here = (document.currentScript && document.currentScript.src) || "";
  var folder = here.slice(0, here.lastIndexOf("/"));
  if (window.require && window.require.config && folder) {
    window.require.config({
      paths: {
        "@jupyter-widgets": folder,
        "@jupyter-widgets/html-manager/dist": folder
      }
    });
  }

  function typeset(elements) {
    var mj = window.MathJax;
    if (!mj || typeof mj.typesetPromise !== "function") {
      return;
    }
    var ready = mj.startup && mj.startup.promise ? mj.startup.promise : Promise.resolve();
    ready.then(function () {
      return mj.typesetPromise(elements);
    }).catch(function (err) {
      console.warn("MathJax could not typeset a widget label:", err);
    });
  }

  function installHub() {
    var mj = window.MathJax;
    if (!mj || mj.Hub) {
      return;
    }
    mj.Hub = {
      Queue: function () {
        var elements = [];
        for (var i = 0; i < arguments.length; i++) {
          var job = arguments[i];
          // MathJax 2 jobs look like ["Typeset", MathJax.Hub, element]
          if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
            elements.push(job[2]);
          }
        }
        if (elements.length) {
          typeset(elements);
        }
      }
    };
  }

  window.addEventListener("load", installHub);
})();
