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
  if (!res.ok) throw new Error((body && body.error) || res.status + " " + res.statusText);
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

async function open() {
  localStorage.setItem("nekro.token", $("token").value);
  for (const f of ["chat", "user", "name"]) localStorage.setItem("nekro." + f, $(f).value);
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

document.addEventListener("DOMContentLoaded", () => {
  for (const f of ["token", "chat", "user", "name"]) {
    const v = localStorage.getItem("nekro." + f);
    if (v) $(f).value = v;
  }
  // A link may carry the settings in its fragment (never sent to a server):
  // /#token=...&chat=...
  const frag = new URLSearchParams(location.hash.slice(1));
  for (const f of ["token", "chat", "user", "name"]) if (frag.get(f)) $(f).value = frag.get(f);
  if (location.hash) history.replaceState(null, "", location.pathname);
  $("connect").addEventListener("submit", (ev) => { ev.preventDefault(); open().catch((e) => say(e.message, true)); });
  $("send").addEventListener("submit", send);
  $("exec").addEventListener("submit", run);
  $("reset").addEventListener("click", reset);
  if ($("token").value) open().catch((e) => say(e.message, true));
  else say("Enter the API token (printed at first start, kept in the data directory's api_token).");
});
