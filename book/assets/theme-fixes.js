/* Fixes to the theme's pages that need the page itself (see also book/tools/theme_fixes.py).
 *
 * 1. Sidebar buttons. sphinx-book-theme 1.3 draws its sidebar buttons in the article header,
 *    but its script and pydata-sphinx-theme 0.17's bind only the first `.primary-toggle` /
 *    `.secondary-toggle` of the page: the navbar's, which this layout never shows. So the
 *    buttons a reader sees did nothing: on a phone the table of contents could not be opened
 *    at all. Each visible button now clicks the bound one (which opens the drawer on a
 *    phone, folds the sidebar on a desktop).
 * 2. Wide equations. A display equation, or an inline formula (span.math), wider than the
 *    column scrolls in its own box (book.css); a box that scrolls must be reachable by
 *    keyboard, so those that overflow at the current width take a tab stop (axe:
 *    scrollable-region-focusable), and an inline one the class math-scrolls, whose edge
 *    shadows show that it goes on.
 * 3. The current chapter in view. On a desktop the chapter list scrolls below the book's
 *    title and search field (book.css); the theme scrolls the whole sidebar, which no longer
 *    moves, so the list is scrolled to the current chapter here.
 */
(function () {
  "use strict";
  function forwardSidebarButtons() {
    ["primary", "secondary"].forEach(function (side) {
      var buttons = document.querySelectorAll("." + side + "-toggle");
      var bound = buttons[0];
      Array.prototype.slice.call(buttons, 1).forEach(function (button) {
        button.addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          bound.click();
        });
      });
    });
  }

  function markScrollingEquations() {
    var boxes = document.querySelectorAll('mjx-container[display="true"], span.math');
    boxes.forEach(function (box) {
      var inline = box.tagName === "SPAN";
      // an inline formula by its own width (the glyphs' ink may pass it by a pixel, which
      // the box hides, as the theme did), a display one by what its box holds
      var formula = inline ? box.querySelector("mjx-container") : null;
      var wide = inline
        ? !!formula && formula.getBoundingClientRect().width > box.clientWidth + 1
        : box.scrollWidth > box.clientWidth + 1;
      if (wide) {
        box.setAttribute("tabindex", "0");
        if (!box.hasAttribute("role")) box.setAttribute("role", "group");
        if (inline) box.classList.add("math-scrolls");
      } else {
        if (box.getAttribute("tabindex") === "0") box.removeAttribute("tabindex");
        if (inline) box.classList.remove("math-scrolls");
      }
    });
  }

  function watchEquations() {
    var mj = window.MathJax;
    if (!mj || !mj.startup || !mj.startup.promise) return; // a page without maths
    mj.startup.promise.then(markScrollingEquations);
    // again once the page's fonts and images are in: the column's width may have changed
    window.addEventListener("load", function () {
      mj.startup.promise.then(markScrollingEquations);
    });
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(markScrollingEquations, 150);
    });
  }

  function showCurrentChapter() {
    var current = document.querySelector(
      ".bd-sidebar-primary nav.bd-docs-nav li.current > a, .bd-sidebar-primary nav.bd-docs-nav a.current");
    if (current) current.scrollIntoView({ block: "nearest" });
  }

  function start() {
    forwardSidebarButtons();
    watchEquations();
    window.addEventListener("load", showCurrentChapter);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
