// Stands in for sanitize-html in the book's widget bundle: BookWidgetManager.inline_sanitize
// (embed.js) replaces the one call ManagerBase makes to it.
export default function sanitize() {
  throw new Error('sanitize-html is not bundled: BookWidgetManager.inline_sanitize replaces it');
}
