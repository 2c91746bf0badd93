/* ipywidgets renders widget labels with the MathJax 2 call MathJax.Hub.Queue(["Typeset", Hub, el]).
 * The book loads MathJax 3, which has no Hub: provide one that forwards to typesetPromise,
 * queueing requests made before MathJax 3 has finished starting up.
 *
 * The widgets may render before MathJax has started (both scripts are deferred, and MathJax's
 * loader fetches its components afterwards), and MathJax 3 replaces the global `MathJax`
 * (its configuration) by its own object while it starts. So every object ever assigned to
 * `window.MathJax` gets the Hub: the property is watched from here on. */
(function () {
  "use strict";
  if (window.MathJax === undefined) return; // page without maths: ipywidgets skips typesetting
  var pending = [];
  var started = false;
  function typeset(element) {
    var mj = current;
    if (started && mj && typeof mj.typesetPromise === "function") {
      mj.typesetPromise(element ? [element] : undefined).catch(function () {});
    } else {
      pending.push(element);
    }
  }
  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset") typeset(job[2]);
        else if (typeof job === "function") job();
      }
    },
  };
  function withHub(value) {
    if (value && typeof value === "object" && !value.Hub) {
      try { value.Hub = hub; } catch (e) { /* a frozen object: leave it */ }
    }
    return value;
  }
  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    enumerable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); },
  });
  var config = current;
  config.startup = config.startup || {};
  var userReady = config.startup.ready;
  config.startup.ready = function () {
    if (userReady) userReady(); else window.MathJax.startup.defaultReady();
    withHub(window.MathJax);
    window.MathJax.startup.promise.then(function () {
      started = true;
      var queued = pending.splice(0);
      queued.forEach(typeset);
    });
  };
})();
