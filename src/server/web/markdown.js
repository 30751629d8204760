// Markdown of the model's answers -> DOM, with marked (Debian's libjs-marked, served by the
// binary as /marked.min.js). marked does not sanitise and the model's text is untrusted, so:
// raw HTML in it is rendered as text, links keep only http(s) and mailto targets, images are
// shown as links (never loaded: the page fetches nothing from elsewhere), and the parsed tree
// passes an allowlist of elements and attributes before it reaches the page.
"use strict";

const markdownRenderer = new marked.Renderer();
markdownRenderer.html = (html) => escapeHtml(html);
// marked passes the title and an image's text escaped, and an href as written (or, for an
// autolink, escaped): a quote is the only character that could end the attribute.
const quotedHref = (href) => '"' + String(href || "").replace(/"/g, "%22") + '"';
markdownRenderer.link = (href, title, text) =>
  "<a href=" + quotedHref(href) + (title ? ' title="' + title + '"' : "") + ">" + text + "</a>";
markdownRenderer.image = (href, title, text) => "<a href=" + quotedHref(href) + ">image: " + (text || "") + "</a>";

// headerIds off: a heading "# prompt" would otherwise become id="prompt" and shadow the page's own.
const markdownOptions = { renderer: markdownRenderer, gfm: true, breaks: true, headerIds: false, mangle: false };

const htmlEntities = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => htmlEntities[c]);
}

// Element -> the attributes it may keep (a function checks the value). Anything else is dropped,
// an element not listed is replaced by its text.
const allowedMarkup = {
  P: {}, BR: {}, HR: {}, H1: {}, H2: {}, H3: {}, H4: {}, H5: {}, H6: {}, UL: {}, LI: {}, BLOCKQUOTE: {},
  PRE: {}, EM: {}, STRONG: {}, DEL: {}, TABLE: {}, THEAD: {}, TBODY: {}, TR: {},
  OL: { start: (value) => /^\d+$/.test(value) },
  TH: { align: (value) => /^(left|right|center)$/.test(value) },
  TD: { align: (value) => /^(left|right|center)$/.test(value) },
  CODE: { class: (value) => /^language-[\w+#.-]+$/.test(value) },
  A: { href: safeLink, title: () => true },
  INPUT: { type: (value) => value === "checkbox", checked: () => true, disabled: () => true },  // GFM task lists
};

// Only web and mail links: the browser's own URL parser decides the scheme (no javascript:,
// data:, vbscript:, however it is spelled).
function safeLink(href) {
  try {
    return ["http:", "https:", "mailto:"].includes(new URL(href, document.baseURI).protocol);
  } catch (error) {
    return false;
  }
}

function sanitizeTree(parent) {
  for (const node of [...parent.childNodes]) {
    if (node.nodeType === Node.TEXT_NODE) continue;
    const allowed = node.nodeType === Node.ELEMENT_NODE && Object.hasOwn(allowedMarkup, node.tagName)
                        ? allowedMarkup[node.tagName] : undefined;
    if (!allowed || (node.tagName === "INPUT" && node.getAttribute("type") !== "checkbox")) {
      node.replaceWith(document.createTextNode(node.nodeType === Node.ELEMENT_NODE ? node.textContent : ""));
      continue;
    }
    for (const { name, value } of [...node.attributes])
      if (!Object.hasOwn(allowed, name) || !allowed[name](value)) node.removeAttribute(name);
    sanitizeTree(node);
    if (node.tagName === "A" && !node.hasAttribute("href")) {
      node.replaceWith(...node.childNodes);  // a link to nowhere is its text
    } else if (node.tagName === "A") {
      node.target = "_blank";
      node.rel = "noopener noreferrer";
    }
    if (node.tagName === "INPUT") node.disabled = true;
  }
}

// The markdown `text` as a DocumentFragment of allowed elements. The HTML is parsed in a
// <template>: an inert document, where no script runs and no image loads.
function renderMarkdown(text) {
  const template = document.createElement("template");
  template.innerHTML = marked.parse(text, markdownOptions);
  sanitizeTree(template.content);
  return document.importNode(template.content, true);
}
