/* Live figures on paper.
 *
 * A live figure is a slider over frames (helpers.figures.widgets): printed as it is, it would
 * show the one frame the slider happens to stand on. For each live figure of the page this
 * script adds, right after it, a strip of three of its frames (the slider's first, middle and
 * last value), each captioned with the slider's label and value. The strip is hidden on screen
 * and shown in print (book.css), where the live figure itself is hidden. The frames are the
 * data: URLs already in the page's saved widget state: printing downloads nothing.
 * A figure with two sliders (a Stack of Stacks) prints the outer slider's three values, each at
 * the inner slider's first value.
 */
(function () {
  "use strict";

  var VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';
  var STATE = 'script[type="application/vnd.jupyter.widget-state+json"]';

  function id(ref) { return typeof ref === "string" ? ref.replace(/^IPY_MODEL_/, "") : ""; }

  // The models under `root`, breadth first (a VBox's children, a Stack's children, ...).
  function descendants(models, root) {
    var out = [], queue = [root], seen = {};
    while (queue.length) {
      var key = queue.shift();
      if (!key || seen[key] || !models[key]) continue;
      seen[key] = true;
      out.push(models[key]);
      (models[key].state.children || []).forEach(function (c) { queue.push(id(c)); });
    }
    return out;
  }

  // The picture one child of a Stack shows: an HTML frame, or the first frame of an inner Stack.
  function frameHtml(models, key) {
    for (var depth = 0; depth < 4 && models[key]; depth++) {
      var m = models[key];
      if (m.model_name === "HTMLModel") return m.state.value || "";
      if (m.model_name !== "StackModel" || !(m.state.children || []).length) return "";
      key = id(m.state.children[0]);
    }
    return "";
  }

  function strip(models, root) {
    var all = descendants(models, root);
    var stack = all.find(function (m) { return m.model_name === "StackModel"; });
    var slider = all.find(function (m) { return m.model_name === "SelectionSliderModel"; });
    if (!stack || !slider) return null;
    var children = stack.state.children || [];
    var labels = slider.state._options_labels || [];
    if (children.length < 2) return null;
    var picks = [0, Math.floor((children.length - 1) / 2), children.length - 1];
    var box = document.createElement("div");
    box.className = "print-strip";
    box.setAttribute("aria-hidden", "true"); // on screen the live figure says it all
    picks.forEach(function (i) {
      var html = frameHtml(models, id(children[i]));
      if (!html) return;
      var cell = document.createElement("figure");
      cell.innerHTML = html; // the book's own saved state: one <img> with a data: URL
      var caption = document.createElement("figcaption");
      caption.textContent = (slider.state.description ? slider.state.description + " " : "") +
        (labels[i] !== undefined ? labels[i] : String(i));
      cell.appendChild(caption);
      box.appendChild(cell);
    });
    return box.children.length ? box : null;
  }

  function start() {
    var tag = document.querySelector(STATE);
    if (!tag) return;
    var models;
    try { models = JSON.parse(tag.textContent).state || {}; } catch (e) { return; }
    document.querySelectorAll(VIEW).forEach(function (view) {
      var root;
      try { root = JSON.parse(view.textContent).model_id; } catch (e) { return; }
      var box = strip(models, root);
      if (box) view.parentNode.insertBefore(box, view.nextSibling);
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
