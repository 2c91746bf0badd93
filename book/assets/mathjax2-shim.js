/* ipywidgets renders widget labels with the MathJax 2 call MathJax.Hub.Queue(["Typeset", Hub, el]).
 * The book loads MathJax 3, which has no Hub: provide one that forwards to typesetPromise,
 * queueing requests made before MathJax 3 has finished starting up. */
(function () {
  "use strict";
  if (window.MathJax === undefined) return; // page without maths: ipywidgets skips typesetting
  var pending = [];
  function typeset(element) {
    var mj = window.MathJax;
    if (mj && typeof mj.typesetPromise === "function") {
      mj.typesetPromise(element ? [element] : undefined).catch(function () {});
    } else {
      pending.push(element);
    }
  }
  function makeHub() {
    return {
      Queue: function () {
        for (var i = 0; i < arguments.length; i++) {
          var job = arguments[i];
          if (Array.isArray(job) && job[0] === "Typeset") typeset(job[2]);
          else if (typeof job === "function") job();
        }
      },
    };
  }
  var config = window.MathJax;
  config.Hub = makeHub();
  config.startup = config.startup || {};
  var userReady = config.startup.ready;
  config.startup.ready = function () {
    if (userReady) userReady(); else window.MathJax.startup.defaultReady();
    window.MathJax.Hub = makeHub();
    window.MathJax.startup.promise.then(function () {
      var queued = pending.splice(0);
      queued.forEach(typeset);
    });
  };
})();
