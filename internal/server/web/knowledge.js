// nekro web UI: the operator's Knowledge page (/api/knowledge): upload
// documents to the global scope or one chat's, follow their imports,
// delete them, and try a search as a chat's search_knowledge would.
// Loaded after app.js, whose helpers (api, auth, el, say, $) it uses.
"use strict";

views.knowledge = { load: () => loadKnowledge(), admin: true };
loaded.knowledge = false;

let knowledgePoll = null;

async function loadKnowledge() {
  const { documents } = await api("/api/knowledge");
  const body = $("kb-docs");
  body.replaceChildren(...documents.map(docRow));
  $("kb-empty").hidden = documents.length > 0;
  const busy = documents.some((d) => d.status !== "ready" && d.status !== "failed");
  clearTimeout(knowledgePoll);
  // Imports in progress: follow them while the page shows.
  if (busy) knowledgePoll = setTimeout(() => { if (view === "knowledge") loadKnowledge().catch((e) => say(e.message, true)); }, 1000);
  return documents;
}

function docRow(d) {
  let status = d.status;
  const cell = el("td", { className: "kb-status" });
  if (d.status === "embedding" && d.chunks > 0) {
    cell.append(el("progress", { max: d.chunks, value: d.done }), " " + d.done + "/" + d.chunks);
  } else {
    if (d.error) status += ": " + d.error;
    cell.append(status);
  }
  const del = el("button", { type: "button", className: "secondary" }, "Delete");
  del.addEventListener("click", async () => {
    if (!confirm("Delete " + d.name + " from " + d.scope + "? Its passages leave search at once.")) return;
    try {
      await api("/api/knowledge/" + encodeURIComponent(d.id), { method: "DELETE" });
      say("Deleted " + d.name);
      await loadKnowledge();
    } catch (e) {
      say(e.message, true);
    }
  });
  const row = el("tr", {},
    el("td", {}, d.scope), el("td", { className: "kb-name" }, d.name), el("td", {}, fmtBytes(d.size)),
    el("td", {}, String(d.chunks)), cell, el("td", {}, new Date(d.created).toLocaleString()), el("td", {}, del));
  row.dataset.id = d.id;
  row.dataset.status = d.status;
  return row;
}

function fmtBytes(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return n + " B";
}

function kbScope() {
  const chat = $("kb-chat").value.trim();
  return $("kb-scope").value === "chat" ? "chat:" + chat : "global";
}

async function uploadKnowledge(ev) {
  ev.preventDefault();
  const files = [...$("kb-file").files];
  if (!files.length) return say("Choose a file first", true);
  if ($("kb-scope").value === "chat" && !$("kb-chat").value.trim()) return say("Name the chat whose documents these are", true);
  const scope = kbScope();
  for (const f of files) {
    const form = new FormData();
    form.append("scope", scope);
    form.append("file", f, f.name);
    say("Uploading " + f.name + "…");
    try {
      const d = await api("/api/knowledge", { method: "POST", body: form });
      say("Added " + d.name + " to " + d.scope + ": importing");
    } catch (e) {
      say(f.name + ": " + e.message, true);
      return;
    }
  }
  $("kb-file").value = "";
  await loadKnowledge();
}

async function searchKnowledgePage(ev) {
  ev.preventDefault();
  const q = new URLSearchParams({ q: $("kb-query").value, top_k: "5" });
  const chat = $("kb-search-chat").value.trim();
  if (chat) q.set("chat", chat);
  try {
    const { passages } = await api("/api/knowledge/search?" + q);
    $("kb-results").replaceChildren(...passages.map((p) => el("li", {},
      el("strong", {}, p.source), " (" + p.scope + ", score " + p.score.toFixed(2) + ")", el("pre", {}, p.text))));
    if (!passages.length) $("kb-results").replaceChildren(el("li", {}, "nothing found"));
  } catch (e) {
    say(e.message, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("kb-upload").addEventListener("submit", uploadKnowledge);
  $("kb-search").addEventListener("submit", searchKnowledgePage);
  $("kb-scope").addEventListener("change", () => { $("kb-chat").disabled = $("kb-scope").value !== "chat"; });
  $("kb-reload").addEventListener("click", () => loadKnowledge().catch((e) => say(e.message, true)));
});
