// nekro web UI: the operator's Models and Personas pages (GET/PUT
// /api/models, POST /api/models/test; /api/presets and each chat's
// choice). Loaded after app.js, whose helpers (api, el, say, $) it uses.
// Keys are write-only: the page never receives one, and an empty key
// field keeps the stored key.
"use strict";

views.models = { load: () => loadModels(), admin: true };
views.presets = { load: () => loadPresets(), admin: true };
loaded.models = loaded.presets = false;

// ---- Models ----

let modelDefault = "chat";

async function loadModels() {
  const set = await api("/api/models");
  modelDefault = set.default || "chat";
  $("model-groups").replaceChildren(...set.groups.map(groupCard));
  say(set.groups.length + " model groups" + (set.source === "env" ? " (from NEKRO_LLM_*, until edited here)" : ""));
}

function field(label, input) {
  return el("label", { className: "field" }, label + " ", input);
}

function groupCard(g = {}) {
  const card = el("fieldset", { className: "card group" });
  const inp = (name, value, props = {}) => el("input", { name, value: value ?? "", ...props });
  const key = inp("api_key", "", { type: "password", autocomplete: "off",
    placeholder: g.has_key ? "stored: leave empty to keep" : "none" });
  const clear = el("input", { type: "checkbox", name: "clear_key" });
  const extra = el("textarea", { name: "extra", rows: 2, spellcheck: false,
    value: g.extra ? JSON.stringify(g.extra) : "", placeholder: '{"presence_penalty": 0.5}' });
  const isDefault = el("input", { type: "radio", name: "default-group", checked: (g.name || "") === modelDefault });
  const result = el("p", { className: "test-result", role: "status" });
  const test = el("button", { type: "button", className: "secondary" }, "Test");
  const remove = el("button", { type: "button", className: "secondary" }, "Remove");
  card.append(
    field("Name", inp("name", g.name, { required: true, pattern: "[a-z0-9_]{1,32}" })),
    field("Base URL", inp("base_url", g.base_url, { type: "url", size: 40 })),
    field("Model", inp("model", g.model)),
    field("Key", key), field("clear the key", clear),
    field("Temperature", inp("temperature", g.temperature, { type: "number", step: "0.1", min: 0, max: 2 })),
    field("top_p", inp("top_p", g.top_p, { type: "number", step: "0.05", min: 0, max: 1 })),
    field("Max tokens (kept free for the answer)", inp("max_tokens", g.max_tokens || "", { type: "number", min: 0 })),
    field("Context window (tokens)", inp("context_window", g.context_window || "", { type: "number", min: 0,
      placeholder: "32768" })),
    field("Falls back to", inp("fallback", g.fallback, { placeholder: "another group's name" })),
    field("Extra request fields (JSON)", extra),
    field("default (answers turns)", isDefault),
    el("div", { className: "actions" }, test, remove), result);
  test.addEventListener("click", async () => {
    result.textContent = "Testing…";
    result.className = "test-result";
    try {
      const r = await api("/api/models/test", { method: "POST", body: JSON.stringify(readGroup(card)) });
      result.textContent = r.ok ? "Answered in " + r.ms + " ms: " + r.answer : "Failed: " + r.error;
      result.className = "test-result " + (r.ok ? "ok" : "error");
    } catch (e) {
      result.textContent = "Failed: " + e.message;
      result.className = "test-result error";
    }
  });
  remove.addEventListener("click", () => card.remove());
  return card;
}

function readGroup(card) {
  const v = (n) => card.querySelector(`[name="${n}"]`);
  const g = { name: v("name").value.trim(), base_url: v("base_url").value.trim(), model: v("model").value.trim(),
    fallback: v("fallback").value.trim() };
  if (v("api_key").value) g.api_key = v("api_key").value;
  if (v("clear_key").checked) g.clear_key = true;
  for (const n of ["temperature", "top_p"]) if (v(n).value !== "") g[n] = Number(v(n).value);
  if (v("max_tokens").value !== "") g.max_tokens = Number(v("max_tokens").value);
  if (v("context_window").value !== "") g.context_window = Number(v("context_window").value);
  if (v("extra").value.trim()) g.extra = JSON.parse(v("extra").value);
  return g;
}

async function saveModels(ev) {
  ev.preventDefault();
  try {
    const cards = [...document.querySelectorAll("#model-groups .group")];
    const groups = cards.map(readGroup);
    const d = cards.findIndex((c) => c.querySelector('[name="default-group"]').checked);
    const body = { default: d >= 0 ? groups[d].name : modelDefault, groups };
    await api("/api/models", { method: "PUT", body: JSON.stringify(body) });
    await loadModels();
    say("Saved: the next turn uses these groups.");
  } catch (e) {
    say(e.message, true);
  }
}

// ---- Personas ----

let presetList = [];

async function loadPresets() {
  const { presets } = await api("/api/presets");
  presetList = presets;
  $("preset-list").replaceChildren(...presets.map(presetCard), presetCard({}));
  const options = [el("option", { value: "0" }, "(the default)"),
    ...presets.map((p) => el("option", { value: String(p.id) }, p.name + " #" + p.id))];
  $("choice-preset").replaceChildren(...options);
  say(presets.length + " personas");
}

function presetCard(p) {
  const isNew = !p.id;
  const form = el("form", { className: "card preset" });
  const inp = (name, value, props = {}) => el("input", { name, value: value ?? "", ...props });
  const lang = el("select", { name: "lang" },
    el("option", { value: "en", selected: p.lang !== "zh" }, "English"),
    el("option", { value: "zh", selected: p.lang === "zh" }, "中文"));
  const content = el("textarea", { name: "content", rows: 5, value: p.content || "", placeholder: "Who the assistant is: the persona's text" });
  const actions = el("div", { className: "actions" }, el("button", { type: "submit" }, isNew ? "Create" : "Save"));
  form.append(el("h3", {}, isNew ? "New persona" : p.name + (p.default ? " (default)" : "") + " #" + p.id),
    field("Name", inp("name", p.name, { required: true })),
    field("Description", inp("description", p.description, { size: 40 })),
    field("Avatar (data: or https URL)", inp("avatar", p.avatar, { size: 40 })),
    field("Tags (comma-separated)", inp("tags", (p.tags || []).join(", "))),
    field("Language of the fixed prompt", lang),
    field("default", el("input", { type: "checkbox", name: "default", checked: !!p.default })),
    field("Persona", content), actions);
  if (!isNew) {
    const exp = el("button", { type: "button", className: "secondary" }, "Export");
    const del = el("button", { type: "button", className: "secondary" }, "Delete");
    actions.append(exp, del);
    exp.addEventListener("click", () => exportPreset(p).catch((e) => say(e.message, true)));
    del.addEventListener("click", async () => {
      try {
        await api("/api/presets/" + p.id, { method: "DELETE" });
        await loadPresets();
      } catch (e) { say(e.message, true); }
    });
  }
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const v = (n) => form.querySelector(`[name="${n}"]`);
    const body = { name: v("name").value, description: v("description").value, avatar: v("avatar").value.trim(),
      content: v("content").value, tags: v("tags").value.split(",").map((t) => t.trim()).filter(Boolean),
      lang: v("lang").value, default: v("default").checked };
    try {
      await api(isNew ? "/api/presets" : "/api/presets/" + p.id, { method: isNew ? "POST" : "PUT", body: JSON.stringify(body) });
      await loadPresets();
      say("Saved: the next turn of the chats using it speaks as it.");
    } catch (e) { say(e.message, true); }
  });
  return form;
}

async function exportPreset(p) {
  const ref = await api("/api/presets/" + p.id + "/export");
  const a = el("a", { href: URL.createObjectURL(new Blob([JSON.stringify(ref, null, 2)], { type: "application/json" })),
    download: "preset-" + p.id + ".json" });
  document.body.append(a);
  a.click();
  a.remove();
}

async function importPresets() {
  const f = $("preset-import").files[0];
  if (!f) return;
  try {
    const r = await api("/api/presets/import", { method: "POST", body: await f.text() });
    await loadPresets();
    say("Imported " + r.presets.length + " persona(s).");
  } catch (e) { say(e.message, true); }
  $("preset-import").value = "";
}

async function chooseForChat(ev) {
  ev.preventDefault();
  const key = $("choice-chat").value.trim();
  if (!key) return;
  try {
    const r = await api(chatPath("/preset", key), { method: "PUT", body: JSON.stringify({ preset: Number($("choice-preset").value) }) });
    say("Chat " + key + " speaks as " + (r.effective ? r.effective.name : "no persona") + " from its next turn.");
    await showPrompt(key);
  } catch (e) { say(e.message, true); }
}

async function showPrompt(key) {
  const { messages } = await api(chatPath("/prompt", key));
  $("chat-prompt").textContent = messages.length ? messages[0].content : "";
}

document.addEventListener("DOMContentLoaded", () => {
  $("models-form").addEventListener("submit", saveModels);
  $("model-add").addEventListener("click", () => $("model-groups").append(groupCard({})));
  $("preset-import").addEventListener("change", importPresets);
  $("preset-choice").addEventListener("submit", chooseForChat);
  $("prompt-show").addEventListener("click", () => {
    const key = $("choice-chat").value.trim();
    if (key) showPrompt(key).catch((e) => say(e.message, true));
  });
});
