/* Accessible live figures.
 *
 * The book's sliders are ipywidgets SelectionSliders rendered by the html-manager. Out of the
 * box, a screen reader meets a handle with no name that announces the option's index ("2"),
 * not the value the figure shows ("0.3"), and a readout that takes typing but moves nothing.
 * For every slider on the page this script
 *   - names the handle after its figure and the slider's label (aria-label), e.g.
 *     "encoder self-attention: layer": the figure's name is the view tag's data-figure-name,
 *     written by book/_ext/theme_fixes.py, unique on the page, so that two sliders labelled
 *     "layer" on one page are told apart,
 *   - makes it announce the readout's text (aria-valuetext), kept current as it moves,
 *   - makes the readout plain text (not editable, hidden from assistive technology, since the
 *     handle now announces the same value),
 *   - drops the label's title="null".
 * Each frame's picture carries its own alt text (helpers.figures.widgets writes it).
 */
(function () {
  "use strict";

  // The name of the live figure a slider belongs to: the widget manager renders each view
  // into a .widget-subarea just before the view's <script> tag, which carries the name.
  function figureName(box) {
    var area = box.closest(".widget-subarea");
    var tag = area ? area.nextElementSibling : null;
    while (tag && !(tag.tagName === "SCRIPT" && tag.hasAttribute("data-figure-name"))) {
      tag = tag.tagName === "SCRIPT" ? null : tag.nextElementSibling;
    }
    return tag ? tag.getAttribute("data-figure-name") : "";
  }

  function fixSlider(box) {
    var label = box.querySelector(".widget-label");
    var labelText = label ? label.textContent.trim() : "";
    var figure = figureName(box);
    var name = figure && labelText ? figure + ": " + labelText : labelText || figure;
    if (label && (label.getAttribute("title") || "null") === "null") {
      if (labelText) label.setAttribute("title", labelText); else label.removeAttribute("title");
    }
    var readout = box.querySelector(".widget-readout");
    if (readout) {
      if (readout.getAttribute("contenteditable") !== "false") {
        readout.setAttribute("contenteditable", "false");
      }
      if (readout.getAttribute("aria-hidden") !== "true") readout.setAttribute("aria-hidden", "true");
      if (readout.hasAttribute("tabindex")) readout.removeAttribute("tabindex");
    }
    var handle = box.querySelector(".noUi-handle");
    if (!handle) return;
    if (name && handle.getAttribute("aria-label") !== name) handle.setAttribute("aria-label", name);
    var value = readout ? readout.textContent.trim() : "";
    if (value && handle.getAttribute("aria-valuetext") !== value) {
      handle.setAttribute("aria-valuetext", value);
    }
  }

  // On a phone an output box scrolls sideways (phone.css); a box that scrolls must be
  // reachable by keyboard (axe: scrollable-region-focusable) and have a name.
  function markScrollingOutputs() {
    document.querySelectorAll(".cell_output").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 1) {
        if (box.getAttribute("tabindex") !== "0") box.setAttribute("tabindex", "0");
        if (!box.hasAttribute("role")) box.setAttribute("role", "group");
        if (!box.hasAttribute("aria-label")) box.setAttribute("aria-label", "output, scrolls sideways");
      } else if (box.getAttribute("tabindex") === "0") {
        box.removeAttribute("tabindex");
      }
    });
  }

  var pending = false;
  function fixAll() {
    pending = false;
    document.querySelectorAll(".widget-slider").forEach(fixSlider);
    markScrollingOutputs();
  }
  function schedule() {
    if (!pending) {
      pending = true;
      window.requestAnimationFrame(fixAll);
    }
  }

  function start() {
    fixAll();
    window.addEventListener("resize", schedule);
    window.addEventListener("load", schedule);
    new MutationObserver(schedule).observe(document.body, {
      childList: true, subtree: true, characterData: true,
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
