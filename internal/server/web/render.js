// nekro web UI: turning untrusted text (the model's replies, its code)
// into DOM. Everything here builds nodes with createElement and
// textContent; no text ever becomes markup (no innerHTML), so a reply
// holding <script> or <img onerror=...> shows as those characters.
"use strict";

// ---- Markdown: a small, strict subset. Blocks: paragraphs, headings,
// fenced and indented code, bullet and numbered lists (nested by
// indentation), block quotes, rules. Inline: `code`, **strong**, *em*,
// _em_ (not inside words, so snake_case stays), ~~del~~, links to http(s)
// only ([text](url), <url>, bare URLs), backslash escapes. Anything else
// is text.

const mdFence = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const mdHeading = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const mdRule = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const mdQuote = /^ {0,3}> ?(.*)$/;
const mdItem = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const mdBlank = /^\s*$/;

// renderMarkdown returns a DocumentFragment showing text as Markdown.
function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  frag.append(...mdBlocks(String(text).replace(/\r\n?/g, "\n").split("\n"), 0));
  return frag;
}

function mdStartsBlock(line) {
  return mdFence.test(line) || mdHeading.test(line) || mdQuote.test(line) || mdRule.test(line) ||
    /^ {0,3}([-*+]|1[.)])[ \t]+\S/.test(line);
}

// mdBlocks renders lines as a list of block nodes. depth bounds nesting
// (quotes in lists in quotes...), so a hostile reply cannot recurse deep.
function mdBlocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (mdBlank.test(line)) {
      i++;
    } else if ((m = mdFence.exec(line))) {
      const fence = m[1];
      const body = [];
      for (i++; i < lines.length; i++) {
        const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
        if (close && close[1][0] === fence[0] && close[1].length >= fence.length) { i++; break; }
        body.push(lines[i]);
      }
      out.push(codeBlock(body.join("\n"), m[2]));
    } else if (/^( {4}|\t)/.test(line) && depth < 8) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || (mdBlank.test(lines[i]) && i + 1 < lines.length && /^( {4}|\t)/.test(lines[i + 1])))) {
        body.push(lines[i].replace(/^( {4}|\t)/, ""));
        i++;
      }
      out.push(codeBlock(body.join("\n"), ""));
    } else if ((m = mdHeading.exec(line))) {
      // Level 1 is the page's own; a reply's headings start at h3.
      const h = document.createElement("h" + Math.min(m[1].length + 2, 6));
      h.append(...inline(m[2] || ""));
      out.push(h);
      i++;
    } else if (mdRule.test(line)) {
      out.push(document.createElement("hr"));
      i++;
    } else if (mdQuote.test(line)) {
      const body = [];
      while (i < lines.length && !mdBlank.test(lines[i])) {
        const q = mdQuote.exec(lines[i]);
        body.push(q ? q[1] : lines[i]);
        i++;
      }
      const bq = document.createElement("blockquote");
      if (depth < 8) bq.append(...mdBlocks(body, depth + 1));
      else bq.textContent = body.join("\n");
      out.push(bq);
    } else if ((m = mdItem.exec(line)) && depth < 8) {
      i = mdList(lines, i, depth, out);
    } else {
      const body = [line];
      for (i++; i < lines.length && !mdBlank.test(lines[i]) && !mdStartsBlock(lines[i]); i++) body.push(lines[i]);
      const p = document.createElement("p");
      p.append(...inline(body.join("\n")));
      out.push(p);
    }
  }
  return out;
}

// mdList renders the list starting at lines[i] into out and returns the
// index of the first line after it.
function mdList(lines, i, depth, out) {
  const first = mdItem.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const list = document.createElement(ordered ? "ol" : "ul");
  if (ordered) {
    const start = parseInt(first[2], 10);
    if (start !== 1) list.start = start;
  }
  let loose = false;
  const items = [];
  while (i < lines.length) {
    const m = mdItem.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const content = (m[3] || "");
    const cut = indent + m[2].length + 1; // continuation lines are indented past the marker
    const body = [content];
    let blankBefore = false;
    for (i++; i < lines.length; i++) {
      const l = lines[i];
      if (mdBlank.test(l)) {
        blankBefore = true;
        continue;
      }
      const lead = l.match(/^ */)[0].length;
      if (lead > indent) {
        if (blankBefore) { body.push(""); loose = true; }
        body.push(l.slice(Math.min(lead, cut)));
        blankBefore = false;
        continue;
      }
      if (!blankBefore && !mdStartsBlock(l) && !mdItem.test(l)) { // lazy continuation
        body.push(l);
        continue;
      }
      break;
    }
    items.push(body);
    if (blankBefore && i < lines.length) {
      const next = mdItem.exec(lines[i]);
      if (next && next[1].length === indent && /\d/.test(next[2]) === ordered) loose = true;
    }
  }
  for (const body of items) {
    const li = document.createElement("li");
    const blocks = mdBlocks(body, depth + 1);
    for (const b of blocks) {
      if (!loose && b.tagName === "P") li.append(...b.childNodes);
      else li.append(b);
    }
    list.append(li);
  }
  out.push(list);
  return i;
}

// codeBlock is a <pre><code>, highlighted when it is Python.
function codeBlock(code, lang) {
  const pre = document.createElement("pre");
  pre.className = "code";
  const c = document.createElement("code");
  lang = (lang || "").toLowerCase();
  if (/^[\w+-]+$/.test(lang)) c.dataset.lang = lang;
  if (lang === "python" || lang === "py" || lang === "python3") c.append(highlightPython(code));
  else c.textContent = code;
  pre.append(c);
  return pre;
}

// safeURL returns s as an absolute http(s) URL, or null.
function safeURL(s) {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch (e) {
    return null;
  }
}

function link(href, children) {
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  a.append(...children);
  return a;
}

const mdPunct = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/;
const mdWord = /[\p{L}\p{N}]/u;

// inline renders a paragraph's text as nodes.
function inline(s, depth = 0) {
  const out = [];
  let text = "";
  const flush = () => { if (text) { out.push(document.createTextNode(text)); text = ""; } };
  const push = (node) => { flush(); out.push(node); };
  const wrap = (tag, inner) => {
    const e = document.createElement(tag);
    e.append(...(depth < 8 ? inline(inner, depth + 1) : [document.createTextNode(inner)]));
    return e;
  };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    const rest = s.slice(i);
    let m;
    if (c === "\\" && i + 1 < s.length && mdPunct.test(s[i + 1])) {
      text += s[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const run = rest.match(/^`+/)[0];
      const end = s.indexOf(run, i + run.length);
      // The closing run must be exactly as long.
      let close = end;
      while (close >= 0 && s[close + run.length] === "`") close = s.indexOf(run, close + run.length + 1);
      if (close >= 0) {
        let code = s.slice(i + run.length, close).replace(/\n/g, " ");
        if (code.length > 2 && code[0] === " " && code[code.length - 1] === " " && code.trim()) code = code.slice(1, -1);
        const e = document.createElement("code");
        e.textContent = code;
        push(e);
        i = close + run.length;
      } else {
        text += run;
        i += run.length;
      }
      continue;
    }
    if ((m = /^\[([^\]\n]*(?:\n[^\]\n]*)*)\]\(\s*<?([^\s()<>]+(?:\([^\s()<>]*\)[^\s()<>]*)*)>?(?:\s+"[^"]*")?\s*\)/.exec(rest))) {
      const href = safeURL(m[2]);
      if (href) {
        push(link(href, depth < 8 ? inline(m[1], depth + 1) : [document.createTextNode(m[1])]));
        i += m[0].length;
        continue;
      }
    }
    if ((m = /^<(https?:\/\/[^\s<>]+)>/i.exec(rest))) {
      const href = safeURL(m[1]);
      if (href) {
        push(link(href, [document.createTextNode(m[1])]));
        i += m[0].length;
        continue;
      }
    }
    if ((c === "h" || c === "H") && (i === 0 || !mdWord.test(s[i - 1])) && (m = /^https?:\/\/[^\s<>"]+/i.exec(rest))) {
      const url = m[0].replace(/[.,;:!?'")\]]+$/, "");
      const href = safeURL(url);
      if (href) {
        push(link(href, [document.createTextNode(url)]));
        i += url.length;
        continue;
      }
    }
    if ((c === "*" || c === "_" || c === "~") && s[i + 1] === c) {
      // **strong**, __strong__, ~~del~~
      const d = c + c;
      const end = s.indexOf(d, i + 2);
      const leftOK = c !== "_" || i === 0 || !mdWord.test(s[i - 1]);
      if (end > i + 2 && leftOK && !/\s/.test(s[i + 2]) && !/\s/.test(s[end - 1]) &&
        (c !== "_" || end + 2 >= s.length || !mdWord.test(s[end + 2]))) {
        push(wrap(c === "~" ? "del" : "strong", s.slice(i + 2, end)));
        i = end + 2;
        continue;
      }
      text += d;
      i += 2;
      continue;
    }
    if (c === "*" || c === "_") {
      // *em*, _em_; an underscore inside a word (snake_case) is text.
      const leftOK = c !== "_" || i === 0 || !mdWord.test(s[i - 1]);
      if (leftOK && i + 1 < s.length && !/\s/.test(s[i + 1])) {
        let end = i + 1;
        for (;;) {
          end = s.indexOf(c, end + 1);
          if (end < 0) break;
          if (s[end + 1] === c) { end++; continue; } // part of a ** run
          if (!/\s/.test(s[end - 1]) && (c !== "_" || end + 1 >= s.length || !mdWord.test(s[end + 1]))) break;
        }
        if (end > i + 1) {
          push(wrap("em", s.slice(i + 1, end)));
          i = end + 1;
          continue;
        }
      }
    }
    text += c;
    i++;
  }
  flush();
  return out;
}

// ---- Python highlighting: a tokenizer good enough for display. Each
// token becomes a <span class="tok-KIND"> holding its text.

const pyKeywords = new Set(("False None True and as assert async await break class continue def del elif else except " +
  "finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case").split(" "));
const pyBuiltins = new Set(("abs all any bool bytes callable chr dict dir divmod enumerate filter float format getattr " +
  "hasattr hash hex id input int isinstance issubclass iter len list map max min next object oct open ord pow print " +
  "range repr reversed round set setattr slice sorted str sum super tuple type vars zip Exception ValueError " +
  "TypeError KeyError IndexError RuntimeError").split(" "));
const pyToken = new RegExp([
  /(#[^\n]*)/.source, // 1 comment
  /((?:\b[rRbBuUfF]{1,2})?(?:'''[\s\S]*?(?:'''|$(?![\s\S]))|"""[\s\S]*?(?:"""|$(?![\s\S]))|'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?))/.source, // 2 string
  /(\b(?:0[xX][\da-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|\d[\d_]*\.?[\d_]*(?:[eE][+-]?\d+)?[jJ]?)|\.\d[\d_]*(?:[eE][+-]?\d+)?[jJ]?)/.source, // 3 number
  /(@[A-Za-z_][\w.]*)/.source, // 4 decorator
  /([A-Za-z_]\w*)/.source, // 5 name
].join("|"), "g");

// highlightPython returns a DocumentFragment of code, its tokens in spans.
function highlightPython(code) {
  const frag = document.createDocumentFragment();
  const span = (kind, t) => {
    const e = document.createElement("span");
    e.className = "tok-" + kind;
    e.textContent = t;
    return e;
  };
  let last = 0;
  let prevName = "";
  code = String(code);
  pyToken.lastIndex = 0;
  for (let m; (m = pyToken.exec(code));) {
    if (m.index > last) frag.append(code.slice(last, m.index));
    const t = m[0];
    let kind = "";
    if (m[1] !== undefined) kind = "comment";
    else if (m[2] !== undefined) kind = "string";
    else if (m[3] !== undefined) kind = "number";
    else if (m[4] !== undefined) kind = "decorator";
    else if (pyKeywords.has(t)) kind = "keyword";
    else if (prevName === "def" || prevName === "class") kind = "def";
    else if (pyBuiltins.has(t)) kind = "builtin";
    else if (/^\s*\(/.test(code.slice(pyToken.lastIndex, pyToken.lastIndex + 8))) kind = "call";
    frag.append(kind ? span(kind, t) : t);
    prevName = m[5] !== undefined ? t : "";
    last = pyToken.lastIndex;
  }
  if (last < code.length) frag.append(code.slice(last));
  return frag;
}
