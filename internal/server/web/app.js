// nekro web UI: a thin client of the HTTP API. The token stays in this
// browser (localStorage); every request sends it as a bearer token.
"use strict";

const $ = (id) => document.getElementById(id);
let stream = null; // AbortController of the event stream
const shown = new Set(); // message ids already on screen

function say(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function api(path, options = {}) {
  const headers = { Authorization: "Bearer " + $("token").value };
  if (options.body) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { ...options, headers });
  const body = res.headers.get("Content-Type")?.includes("json") ? await res.json() : null;
  if (!res.ok) {
    const err = new Error((body && body.error) || res.status + " " + res.statusText);
    err.status = res.status;
    err.body = body; // a refused setting names its field
    throw err;
  }
  return body;
}

function chatPath(suffix) {
  return "/api/chats/" + encodeURIComponent($("chat").value) + suffix;
}

async function showAttachment(li, a) {
  const line = document.createElement("span");
  line.className = "meta";
  line.textContent = "📎 " + a.name + " (" + a.size + " bytes)";
  li.append(line);
  if (a.kind !== "image") return;
  try {
    const res = await fetch(chatPath("/uploads/" + encodeURIComponent(a.name)), {
      headers: { Authorization: "Bearer " + $("token").value },
    });
    if (!res.ok) return;
    const img = document.createElement("img");
    img.alt = a.name;
    img.src = URL.createObjectURL(await res.blob());
    li.append(img);
  } catch (e) { /* the name line stays */ }
}

function showMessage(m) {
  if (shown.has(m.id)) return;
  shown.add(m.id);
  const li = document.createElement("li");
  li.className = m.role;
  li.dataset.id = m.id;
  const meta = document.createElement("span");
  meta.className = "meta";
  meta.textContent = (m.sender_name || m.role) + " · " + new Date(m.time).toLocaleTimeString();
  li.append(meta, document.createTextNode(m.text));
  for (const a of m.attachments || []) showAttachment(li, a);
  $("messages").append(li);
  li.scrollIntoView({ block: "end" });
}

async function follow() {
  if (stream) stream.abort();
  stream = new AbortController();
  const res = await fetch(chatPath("/events"), {
    headers: { Authorization: "Bearer " + $("token").value },
    signal: stream.signal,
  });
  if (!res.ok) throw new Error("event stream: " + res.status);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).join("\n");
      if (!data) continue;
      const e = JSON.parse(data);
      if (e.type === "message" && e.message) showMessage(e.message);
      if (e.type === "reset") { $("messages").replaceChildren(); shown.clear(); }
      if (e.type === "turn" && e.turn) say("turn " + e.turn.status);
    }
  }
}

// remember keeps what the user entered (the token included) in this browser.
function remember() {
  for (const f of ["token", "chat", "user", "name"]) localStorage.setItem("nekro." + f, $(f).value);
}

async function open() {
  remember();
  $("chat-title").textContent = $("chat").value;
  $("messages").replaceChildren();
  shown.clear();
  const status = await api("/api/status");
  $("model").textContent = status.model ? "Model: " + status.model : "No model configured: " + (status.model_error || "");
  $("plugins").replaceChildren(...status.plugins.map((p) => {
    const li = document.createElement("li");
    li.textContent = p.name + " (" + p.key + "): " + p.methods.join(", ");
    return li;
  }));
  const history = await api(chatPath("/messages"));
  history.messages.forEach(showMessage);
  say("connected to chat " + $("chat").value);
  follow().catch((e) => { if (e.name !== "AbortError") say(e.message, true); });
}

async function send(ev) {
  ev.preventDefault();
  try {
    await api(chatPath("/messages"), {
      method: "POST",
      body: JSON.stringify({ user_id: $("user").value, user_name: $("name").value, text: $("text").value }),
    });
    $("text").value = "";
    say("sent; the assistant is thinking");
  } catch (e) { say(e.message, true); }
}

async function run(ev) {
  ev.preventDefault();
  const out = $("run");
  out.textContent = "running…";
  try {
    const r = await api(chatPath("/exec"), {
      method: "POST",
      body: JSON.stringify({ user_id: $("user").value, code: $("code").value }),
    });
    const head = document.createElement("p");
    const stop = document.createElement("span");
    stop.className = "stop " + r.stop_type;
    stop.textContent = r.stop_type;
    head.append(stop, " · exit " + r.exit_code + " · " + r.duration_ms + " ms");
    const pre = document.createElement("pre");
    pre.textContent = r.output || "(no output)";
    const calls = document.createElement("table");
    calls.innerHTML = "<tr><th>method</th><th>µs</th><th>error</th></tr>";
    for (const c of r.calls) {
      const tr = calls.insertRow();
      for (const v of [c.method, c.duration_us, c.error || ""]) tr.insertCell().textContent = v;
    }
    out.replaceChildren(head, pre, calls);
  } catch (e) { out.textContent = e.message; }
}

async function reset() {
  if (!confirm("Clear chat " + $("chat").value + "'s history and run the plugins' reset hooks?")) return;
  try { await api(chatPath("/reset"), { method: "POST" }); say("chat reset"); } catch (e) { say(e.message, true); }
}

// ---- Plugins page: GET /api/plugins, a switch per plugin, its methods,
// and a settings form generated from the plugin's JSON Schema. Plugin
// names, docs and values are untrusted: they only ever become text.

// el makes an element: props are properties (className, type, ...) except
// "data-*" and "aria-*", which are attributes; children are nodes or text.
function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k.startsWith("data-") || k.startsWith("aria-") || k === "role") e.setAttribute(k, v);
    else e[k] = v;
  }
  e.append(...children.filter((c) => c !== null && c !== undefined && c !== ""));
  return e;
}

let uid = 0; // ids tying labels and error texts to their inputs

function pluginPath(key, suffix) {
  return "/api/plugins/" + encodeURIComponent(key) + suffix;
}

async function loadPlugins() {
  remember();
  const { plugins } = await api("/api/plugins");
  $("plugin-list").replaceChildren(...plugins.map(pluginCard));
  const on = plugins.filter((p) => p.enabled).length;
  say(plugins.length + " plugins, " + on + " enabled");
}

function pluginCard(p) {
  const card = el("article", { className: "plugin", "data-key": p.key });
  const title = el("h3", {}, p.name || p.key, " ", el("code", { className: "key" }, p.key),
    p.version ? el("span", { className: "version" }, " v" + p.version) : null);
  const sw = el("input", { type: "checkbox", className: "enable", role: "switch", "aria-label": "Enable " + (p.name || p.key) });
  const state = el("span", { className: "state" });
  const swError = el("p", { className: "error switch-error", role: "alert" });
  const show = (enabled, reason) => {
    sw.checked = sw.defaultChecked = enabled;
    card.dataset.enabled = String(enabled);
    state.textContent = enabled ? "enabled" : "disabled" + (reason ? ": " + reason : "");
  };
  show(p.enabled, p.disabled_reason);
  sw.addEventListener("change", () => toggle(p.key, sw, show, swError));
  card.append(el("header", {}, title, el("label", { className: "switch" }, sw, state)), swError);
  if (p.description) card.append(el("p", { className: "description" }, p.description));
  if (/^https?:\/\//i.test(p.url || "")) {
    card.append(el("p", { className: "hint" }, el("a", { href: p.url, rel: "noopener noreferrer", target: "_blank" }, p.url)));
  }
  if (p.methods && p.methods.length) card.append(methodList(p.methods));
  if (p.config) card.append(settingsSection(p.key, p.config));
  return card;
}

async function toggle(key, sw, show, swError) {
  const want = sw.checked;
  sw.disabled = true;
  swError.textContent = "";
  try {
    const r = await api(pluginPath(key, want ? "/enable" : "/disable"), { method: "POST" });
    let reason = "";
    if (!r.enabled) { // the list says why (best effort)
      try {
        const p = (await api("/api/plugins")).plugins.find((q) => q.key === key);
        reason = (p && p.disabled_reason) || "";
      } catch (e) { /* the state alone is shown */ }
    }
    show(r.enabled, reason);
    say(key + (r.enabled ? " enabled" : " disabled"));
  } catch (e) {
    sw.checked = !want;
    swError.textContent = (want ? "Not enabled: " : "Not disabled: ") + e.message;
  } finally {
    sw.disabled = false;
  }
}

function methodList(methods) {
  const list = el("ul", { className: "methods" });
  for (const m of methods) {
    const li = el("li", { className: "method", "data-method": m.name },
      el("code", { className: "signature" }, m.signature || m.name), " ",
      el("span", { className: "type", "data-type": (m.type || "").toLowerCase() }, m.type));
    const doc = (m.doc || "").trim();
    if (m.description && !doc.startsWith(m.description.trim())) li.append(el("p", { className: "mdesc" }, m.description));
    if (doc) li.append(el("pre", { className: "doc" }, doc));
    list.append(li);
  }
  return el("details", { className: "methods" }, el("summary", {}, methods.length + (methods.length === 1 ? " method" : " methods")), list);
}

// kindOf reads a property's JSON Schema type: "integer", or ["integer", "null"].
function kindOf(prop) {
  const types = Array.isArray(prop.type) ? prop.type : prop.type ? [prop.type] : [];
  return { kind: types.find((t) => t !== "null") || "", nullable: types.includes("null") };
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

// settingField makes one setting's row. read() returns the value to send,
// undefined for "leave it" (an empty secret), or throws a message to show.
function settingField(name, prop, value) {
  const { kind, nullable } = kindOf(prop);
  const id = "setting-" + ++uid;
  const error = el("span", { className: "field-error", id: id + "-error", role: "alert" });
  let input;
  let read;
  if (prop["x-secret"]) {
    // Write-only: the value never comes to the page; empty keeps it.
    const set = value !== null && value !== undefined && value !== "";
    input = el("input", { type: "password", autocomplete: "new-password",
      placeholder: set ? "set (hidden): type to replace it" : "not set" });
    input.dataset.secret = set ? "set" : "unset";
    read = () => (input.value === "" ? undefined : input.value);
  } else if (Array.isArray(prop.enum)) {
    const choices = nullable ? [null, ...prop.enum] : prop.enum;
    input = el("select");
    choices.forEach((c, i) => {
      const o = el("option", { value: String(i) }, c === null ? "(none)" : String(c));
      o.defaultSelected = same(c, value);
      input.append(o);
    });
    if (!choices.some((c) => same(c, value))) { // a value from the file the choices lack
      const o = el("option", { value: "current" }, (typeof value === "string" ? value : JSON.stringify(value)) + " (current)");
      o.defaultSelected = true;
      input.append(o);
    }
    read = () => (input.value === "current" ? value : choices[Number(input.value)]);
  } else if (kind === "boolean") {
    input = el("input", { type: "checkbox", defaultChecked: value === true });
    read = () => input.checked;
  } else if (kind === "integer" || kind === "number") {
    input = el("input", { type: "number", step: kind === "integer" ? "1" : "any",
      defaultValue: value === null || value === undefined ? "" : String(value) });
    if (typeof prop.minimum === "number") input.min = String(prop.minimum);
    if (typeof prop.maximum === "number") input.max = String(prop.maximum);
    read = () => {
      if (input.validity.badInput) throw new Error("not a number");
      const t = input.value.trim();
      if (t === "") return null; // the API answers whether empty is allowed
      return Number(t);
    };
  } else if (kind === "string") {
    input = prop["x-multiline"] ? el("textarea", { rows: 4 }) : el("input", { type: "text" });
    input.defaultValue = value === null || value === undefined ? "" : String(value);
    read = () => (nullable && input.value === "" ? null : input.value);
  } else {
    // Lists, mappings and kinds the page does not know: JSON text.
    input = el("textarea", { rows: 3, className: "json", spellcheck: false });
    input.defaultValue = value === undefined ? "" : JSON.stringify(value, null, 2);
    read = () => {
      const t = input.value.trim();
      if (t === "") {
        if (nullable) return null;
        if (kind === "array") return [];
        if (kind === "object") return {};
      }
      try { return JSON.parse(t); } catch (e) { throw new Error("not valid JSON: " + e.message); }
    };
  }
  input.id = id;
  input.name = name;
  input.setAttribute("aria-describedby", id + "-error");
  const label = el("label", { htmlFor: id }, prop.title || name);
  if (prop.title && prop.title !== name) label.append(" ", el("code", { className: "name" }, name));
  const hints = [];
  if (prop.description) hints.push(prop.description);
  if (!prop["x-secret"] && prop.default !== undefined && !same(prop.default, value)) {
    const d = prop.default;
    hints.push("default: " + (d === "" ? "(empty)" : typeof d === "string" ? d : JSON.stringify(d)));
  }
  const row = el("div", { className: "field", "data-field": name }, label, input,
    hints.length ? el("small", { className: "hint" }, hints.join(" · ")) : null, error);
  if (kind === "boolean" && !prop["x-secret"] && !Array.isArray(prop.enum)) row.classList.add("check");
  return {
    name, row, input,
    // changed returns the value to send, or undefined if there is none.
    changed() {
      const v = read();
      if (v === undefined || (!prop["x-secret"] && same(v, value))) return undefined;
      return v;
    },
    fail(msg) {
      error.textContent = msg;
      if (msg) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    },
  };
}

function settingsSection(key, config) {
  const schema = config.schema || {};
  const props = schema.properties || {};
  const values = config.values || {};
  const order = Array.isArray(schema["x-order"]) ? [...schema["x-order"]] : [];
  for (const name of Object.keys(props)) if (!order.includes(name)) order.push(name);
  const fields = [];
  for (const name of order) {
    const prop = props[name];
    if (!prop || prop["x-hidden"]) continue;
    fields.push(settingField(name, prop, values[name]));
  }
  const save = el("button", { type: "submit" }, "Save");
  const result = el("span", { className: "result", role: "status" });
  const form = el("form", { className: "settings", noValidate: true }, ...fields.map((f) => f.row),
    el("div", { className: "actions" }, save, el("button", { type: "reset", className: "secondary" }, "Undo changes"), result));
  const section = el("section", { className: "settings" }, el("h4", {}, "Settings"),
    el("p", { className: "hint" }, "Kept in ", el("code", {}, config.file || "config.yaml")));
  if (config.error) section.append(el("p", { className: "error" }, "The file's content is not in force: " + config.error));
  section.append(form);
  form.addEventListener("reset", () => {
    for (const f of fields) f.fail("");
    result.textContent = "";
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    result.className = "result";
    const changes = {};
    let bad = false;
    for (const f of fields) {
      f.fail("");
      try {
        const v = f.changed();
        if (v !== undefined) changes[f.name] = v;
      } catch (e) {
        f.fail(e.message);
        bad = true;
      }
    }
    const fail = (msg) => { result.className = "result error"; result.textContent = msg; };
    if (bad) return fail("Not saved: correct the marked fields.");
    if (Object.keys(changes).length === 0) { result.textContent = "Nothing changed."; return; }
    save.disabled = true;
    result.textContent = "Saving…";
    try {
      const fresh = settingsSection(key, await api(pluginPath(key, "/config"), { method: "PUT", body: JSON.stringify(changes) }));
      section.replaceWith(fresh);
      fresh.querySelector(".result").textContent = "Saved: " + Object.keys(changes).join(", ") + ".";
    } catch (e) {
      save.disabled = false;
      const field = e.body && fields.find((f) => f.name === e.body.field);
      if (field) {
        field.fail(e.message);
        field.input.focus();
        fail("Not saved: see " + field.name + ".");
      } else fail("Not saved: " + e.message);
    }
  });
  return section;
}

// ---- Pages: #view=chat or #view=plugins. The fragment may also carry
// the settings (never sent to a server): /#token=...&chat=...&view=plugins

let view = "chat";
const loaded = { chat: false, plugins: false };

function load(v) {
  loaded[v] = true;
  (v === "chat" ? open() : loadPlugins()).catch((e) => { loaded[v] = false; say(e.message, true); });
}

function showView(v) {
  view = v === "plugins" ? "plugins" : "chat";
  document.body.dataset.view = view;
  $("chat-view").hidden = view !== "chat";
  $("plugins-view").hidden = view !== "plugins";
  $("chat").required = view === "chat";
  for (const a of document.querySelectorAll("#tabs a")) {
    if (a.dataset.view === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!$("token").value) say("Enter the API token (printed at first start, kept in the data directory's api_token).");
  else if (!loaded[view]) load(view);
}

// fromFragment applies the fragment's settings and returns its page; the
// address keeps only the page, never the token.
function fromFragment() {
  const frag = new URLSearchParams(location.hash.slice(1));
  let changed = false;
  for (const f of ["token", "chat", "user", "name"]) {
    if (frag.get(f)) { $(f).value = frag.get(f); changed = true; }
  }
  if (changed) { loaded.chat = loaded.plugins = false; }
  const v = frag.get("view") === "plugins" ? "plugins" : "chat";
  if (location.hash && location.hash !== "#view=" + v) history.replaceState(null, "", location.pathname + "#view=" + v);
  return v;
}

document.addEventListener("DOMContentLoaded", () => {
  for (const f of ["token", "chat", "user", "name"]) {
    const v = localStorage.getItem("nekro." + f);
    if (v) $(f).value = v;
  }
  $("connect").addEventListener("submit", (ev) => {
    ev.preventDefault();
    loaded.chat = loaded.plugins = false;
    load(view);
  });
  $("send").addEventListener("submit", send);
  $("exec").addEventListener("submit", run);
  $("reset").addEventListener("click", reset);
  $("plugins-reload").addEventListener("click", () => load("plugins"));
  window.addEventListener("hashchange", () => showView(fromFragment()));
  showView(fromFragment());
});
