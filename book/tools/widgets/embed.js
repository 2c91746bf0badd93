// The book's widget manager: renders the widget state saved in a page (ipywidgets 8 core
// widgets: sliders, Stack, Image, boxes, jslink) with ipywidgets' own `base` and `controls`
// packages, no kernel. Bundled by book/tools/vendor.py with esbuild into
// book/vendor/widgets/embed.js (served as _static/widgets/embed.js).
//
// What it leaves out of @jupyter-widgets/html-manager's embed.js (1.9 MB), which renders
// the same state: the ipywidgets 7 packages, the Output widget with JupyterLab's
// rendermime, the JSON-schema validator, sanitize-html with its HTML and CSS parsers (an
// HTML description is cleaned with the browser's own parser, to the same allow-list), and
// FontAwesome 5 (its CSS and fonts, which also restyled the theme's icons). And it does not wait for the window's `load` event (every
// image and font of the page): it renders as soon as it runs (a deferred script runs once
// the page is parsed), the widgets in page order.
import { ManagerBase } from '@jupyter-widgets/base-manager';
import { removeMath, replaceMath } from '@jupyter-widgets/base-manager/lib/latex';
import * as base from '@jupyter-widgets/base';
import * as controls from '@jupyter-widgets/controls';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import css from 'widgets-css'; // the widgets' CSS, bundled first by vendor.py

// ManagerBase's allow-list for HTML descriptions (`description_allow_html=True`), as it
// gives it to sanitize-html: these tags and attributes, URLs with these schemes (or none).
const ALLOWED_TAGS = new Set(['A', 'ABBR', 'B', 'CODE', 'EM', 'I', 'IMG', 'LI', 'OL', 'SPAN',
  'STRONG', 'UL']);
const DROPPED_WITH_TEXT = new Set(['SCRIPT', 'STYLE', 'TEXTAREA', 'OPTION', 'NOSCRIPT']);
const URL_ATTRIBUTES = { A: 'href', IMG: 'src' };
const SCHEME = /^\s*([a-z][a-z0-9+.-]*):/i;
const ALLOWED_SCHEMES = new Set(['http', 'https', 'ftp', 'mailto', 'tel']);

function allowedAttribute(tag, name, value) {
  if (name.startsWith('aria-') || name === 'class' || name === 'style' || name === 'title') {
    return true;
  }
  if (URL_ATTRIBUTES[tag] !== name) return false;
  const scheme = SCHEME.exec(value);
  return scheme === null || ALLOWED_SCHEMES.has(scheme[1].toLowerCase());
}

function clean(node) {
  for (const child of Array.from(node.childNodes)) {
    if (child.nodeType === Node.TEXT_NODE) continue;
    if (child.nodeType !== Node.ELEMENT_NODE) {
      child.remove(); // comments, processing instructions
      continue;
    }
    clean(child);
    if (DROPPED_WITH_TEXT.has(child.tagName)) {
      child.remove();
    } else if (!ALLOWED_TAGS.has(child.tagName)) {
      child.replaceWith(...child.childNodes); // a tag not allowed: keep its text
    } else {
      for (const attribute of Array.from(child.attributes)) {
        if (!allowedAttribute(child.tagName, attribute.name, attribute.value)) {
          child.removeAttribute(attribute.name);
        }
      }
    }
  }
}

function sanitizeInline(html) {
  // An inert document: nothing in it loads or runs while it is parsed and cleaned.
  const doc = document.implementation.createHTMLDocument('');
  doc.body.innerHTML = html;
  clean(doc.body);
  return doc.body.innerHTML;
}

const MODULES = { '@jupyter-widgets/base': base, '@jupyter-widgets/controls': controls };

class BookWidgetManager extends ManagerBase {
  constructor() {
    super();
    this._views = new Set();
    window.addEventListener('resize', () => {
      this._views.forEach((view) =>
        MessageLoop.postMessage(view.luminoWidget, Widget.ResizeMessage.UnknownSize));
    });
  }

  async loadClass(className, moduleName, moduleVersion) {
    const module = MODULES[moduleName];
    if (module === undefined || !/^2\./.test(moduleVersion)) {
      throw new Error(`the book's widget manager has no ${moduleName}@${moduleVersion} ` +
        '(it renders ipywidgets 8 core widgets: @jupyter-widgets/base and controls 2.x)');
    }
    if (module[className] === undefined) {
      throw new Error(`class ${className} not found in ${moduleName}@${moduleVersion}`);
    }
    return module[className];
  }

  async display_view(view, el) {
    const v = await view;
    Widget.attach(v.luminoWidget, el);
    this._views.add(v);
    v.once('remove', () => this._views.delete(v));
  }

  inline_sanitize(source) {
    const parts = removeMath(source);
    return replaceMath(sanitizeInline(parts.text), parts.math);
  }

  _get_comm_info() {
    return Promise.resolve({});
  }

  _create_comm() {
    return Promise.resolve({ on_close() {}, on_msg() {}, close() {} });
  }
}

function addStyle() {
  const style = document.createElement('style');
  style.dataset.source = 'book-widgets';
  style.textContent = css;
  document.head.appendChild(style);
}

async function renderState(stateTag) {
  const manager = new BookWidgetManager();
  const models = await manager.set_state(JSON.parse(stateTag.textContent));
  const byId = new Map(models.map((m) => [m.model_id, m]));
  const viewTags = document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]');
  await Promise.all(Array.from(viewTags).map(async (viewTag) => {
    const model = byId.get(JSON.parse(viewTag.textContent).model_id);
    if (model === undefined || viewTag.parentElement === null) return;
    const prev = viewTag.previousElementSibling;
    if (prev && prev.tagName === 'IMG' && prev.classList.contains('jupyter-widget')) {
      prev.remove(); // a static snapshot the live view replaces
    }
    const area = document.createElement('div');
    area.className = 'widget-subarea';
    viewTag.parentElement.insertBefore(area, viewTag);
    await manager.display_view(manager.create_view(model), area);
  }));
}

async function renderWidgets() {
  const states = document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-state+json"]');
  if (!states.length) return;
  addStyle();
  await Promise.all(Array.from(states).map(renderState));
  document.documentElement.dataset.widgetsRendered = 'true';
}

if (!window._jupyter_widget_embedder) {
  window._jupyter_widget_embedder = true;
  const start = () => renderWidgets().catch((error) => {
    console.error('the page\'s widgets could not be rendered:', error);
  });
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start, { once: true });
  } else {
    start();
  }
}
