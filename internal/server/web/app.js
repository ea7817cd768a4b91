// nekro web UI: a thin client of the HTTP API. The token stays in this
// browser (localStorage) until the user logs out; every request sends it
// as a bearer token. It is either the operator's admin token or a user's
// token (GET /api/me says which): a user sees only their chats and their
// runs, and neither the playground, the dashboard nor the plugins page.
//
// Text from chats, the model and plugins is untrusted: it only ever
// becomes DOM text (render.js builds replies' Markdown node by node).
"use strict";

const $ = (id) => document.getElementById(id);

// Page sizes: history and chat list load in pages, older ones on demand.
const historyPage = 50;
const chatPage = 30;
const turnPage = 100;

// state is the open chat's: what is on screen and what the API said.
const state = {
  chat: "", // the open chat's key
  me: null, // GET /api/me: {admin: true} or {user_id, ...}
  gen: 0, // bumped on every chat switch: answers for a chat left are dropped
  stream: null, // AbortController of the chat's event stream
  shown: new Set(), // message ids on screen
  turns: new Map(), // turn id -> turn
  runs: new Map(), // turn id -> its runs, by iteration
  olderBefore: null, // the history's next_before: null at its start
  turnsBefore: null, // next_before of the turns and runs lists
  runsBefore: null,
  loadingOlder: false,
  unopened: false, // a user's new chat, readable once their first message is in
  chatsBefore: 0, // the chat list's next page starts below this message id
  pending: [], // files to send with the next message
};

function say(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function auth() {
  return { Authorization: "Bearer " + $("token").value };
}

// api calls the API and returns its JSON; a refusal throws an Error with
// the API's message, its status and body.
async function api(path, options = {}) {
  const headers = auth();
  if (typeof options.body === "string") headers["Content-Type"] = "application/json";
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

function chatPath(suffix, key = state.chat) {
  return "/api/chats/" + encodeURIComponent(key) + suffix;
}

function isAdmin() {
  return !state.me || state.me.admin === true || !state.me.user_id;
}

function fmtMS(ms) {
  return ms >= 1000 ? (ms / 1000).toFixed(1) + " s" : ms + " ms";
}

function fmtSize(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return n + " bytes";
}

function fmtTime(t) {
  const d = new Date(t);
  if (isNaN(d)) return "";
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

// ---- Sign in and out. The token field takes either kind of token.

async function signIn() {
  let me;
  try {
    me = await api("/api/me");
  } catch (e) {
    if (e.status !== 404) throw e;
    me = { admin: true }; // a server without user tokens: the token is the admin's
  }
  state.me = me;
  const admin = isAdmin();
  // Whose identity the user and name fields hold: another's (a user
  // token signed in before in this browser) is not kept, or the operator
  // would post as that user.
  const who = admin ? "operator" : "user:" + me.user_id;
  if (localStorage.getItem("nekro.who") !== who) forgetIdentity();
  localStorage.setItem("nekro.who", who);
  document.body.dataset.role = admin ? "admin" : "user";
  $("user").readOnly = !admin;
  if (!admin) {
    $("user").value = me.user_id;
    const name = me.name || me.user_name;
    if (name && (!$("name").value || $("name").value === $("name").defaultValue)) $("name").value = name;
  }
  $("who").textContent = admin ? "Signed in as the operator" : "Signed in as " + me.user_id;
  $("logout").hidden = false;
  $("sign-in").hidden = true; // the token is kept; Log out forgets it
  remember();
}

// forgetIdentity puts the user id and name back to their defaults, in the
// page and in this browser's storage.
function forgetIdentity() {
  for (const f of ["user", "name"]) {
    $(f).value = $(f).defaultValue;
    localStorage.removeItem("nekro." + f);
  }
}

// remember keeps what the user entered (the token included) in this browser.
function remember() {
  for (const f of ["token", "user", "name"]) localStorage.setItem("nekro." + f, $(f).value);
  if (state.chat) localStorage.setItem("nekro.chat", state.chat);
}

// logout forgets the token (and the open chat) in this browser.
function logout() {
  if (state.stream) state.stream.abort();
  state.gen++;
  for (const f of ["token", "chat", "who"]) localStorage.removeItem("nekro." + f);
  $("token").value = "";
  state.me = null;
  state.chat = "";
  for (const v of Object.keys(loaded)) loaded[v] = false;
  delete document.body.dataset.role;
  $("user").readOnly = false;
  forgetIdentity(); // the next to sign in here does not post as this user
  $("who").textContent = "";
  $("logout").hidden = true;
  $("sign-in").hidden = false;
  clearRunLog();
  clearDashboard();
  clearChat();
  $("chats").replaceChildren();
  $("chats-more").hidden = true;
  $("chat-title").textContent = "";
  $("plugin-list").replaceChildren();
  $("plugin-failed").replaceChildren();
  $("plugin-failed").hidden = true;
  $("plugins").replaceChildren();
  $("model").textContent = "";
  say("Signed out: this browser no longer keeps the token.");
  $("token").focus();
}

// ---- The chat list: GET /api/chats, most recently active first.

function chatItem(key) {
  let li = $("chats").querySelector('li[data-chat="' + CSS.escape(key) + '"]');
  if (!li) {
    li = el("li", { "data-chat": key });
    const b = el("button", { type: "button", className: "chat-link" });
    b.addEventListener("click", () => openChat(key));
    li.append(b);
  }
  return li;
}

// showChat puts a chat in the list, filled from its summary (or updated
// from parts: a new last message, a turn state); top moves it first.
function showChat(key, { last, time, turnState, top } = {}) {
  const li = chatItem(key);
  if (last !== undefined) li.last = last;
  if (time !== undefined) li.time = time;
  if (turnState !== undefined) li.turnState = turnState;
  const b = li.firstChild;
  const stateText = li.turnState === "running" ? "working…" : li.turnState === "failed" ? "failed" : "";
  const m = li.last;
  let preview = "";
  if (m) {
    preview = (m.text || "").replace(/\s+/g, " ").trim() ||
      (m.attachments && m.attachments.length ? "📎 " + m.attachments.map((a) => a.name).join(", ") : "");
    if (preview.length > 90) preview = preview.slice(0, 90) + "…";
    preview = (m.sender_name || m.role) + ": " + preview;
  }
  b.replaceChildren(...[
    el("span", { className: "chat-key" }, key),
    stateText ? el("span", { className: "chat-state", "data-state": li.turnState }, stateText) : null,
    el("span", { className: "chat-last" }, preview || "no messages yet"),
    li.time ? el("time", { dateTime: new Date(li.time).toISOString() }, fmtTime(li.time)) : null].filter(Boolean));
  li.dataset.state = li.turnState || "";
  if (top) $("chats").prepend(li);
  else if (!li.isConnected) $("chats").append(li);
  markChat();
}

function markChat() {
  for (const li of $("chats").children) {
    if (li.dataset.chat === state.chat) li.firstChild.setAttribute("aria-current", "true");
    else li.firstChild.removeAttribute("aria-current");
  }
}

// mine returns the chat keys a user's token may open (from /api/me), or
// null when the list is not restricted.
function mine() {
  if (isAdmin() || !Array.isArray(state.me.chats)) return null;
  return new Set(state.me.chats.map((c) => (typeof c === "string" ? c : c.chat_key || c.key)));
}

// loadChats loads the list's first page (fresh: replacing the list;
// otherwise moving what changed to the top) or, with more, the next page.
async function loadChats({ fresh = false, more = false } = {}) {
  const q = "?limit=" + chatPage + (more && state.chatsBefore ? "&before=" + state.chatsBefore : "");
  const { chats } = await api("/api/chats" + q);
  const allowed = mine();
  const list = allowed ? chats.filter((c) => allowed.has(c.chat_key)) : chats;
  if (fresh) $("chats").replaceChildren();
  const show = (c, top) => showChat(c.chat_key, { last: c.last_message, time: c.last_activity, turnState: c.turn_state, top });
  if (more) list.forEach((c) => show(c, false));
  else [...list].reverse().forEach((c) => show(c, true));
  if (fresh || more) {
    if (chats.length) state.chatsBefore = chats[chats.length - 1].last_message.id;
    $("chats-more").hidden = chats.length < chatPage;
  }
  if (fresh && allowed) for (const k of allowed) if (!chatItem(k).isConnected) showChat(k, {});
}

// ---- The open chat: its history (older pages as the user scrolls up),
// its turns and runs, and its event stream.

function clearChat() {
  state.unopened = false;
  $("messages").replaceChildren();
  state.shown.clear();
  state.turns.clear();
  state.runs.clear();
  state.olderBefore = state.turnsBefore = state.runsBefore = null;
  state.pending = [];
  showPending();
  $("working").hidden = true;
  $("chat-error").hidden = true;
  $("history-top").hidden = true;
  $("send-error").textContent = "";
}

// openChat shows chat key. A user's token reads only the user's chats
// (the API answers 404 for any other, existing or not); fresh, from New
// chat, lets a user send the first message of a chat that may not exist
// yet, which makes it theirs (the API refuses a chat with other members).
async function openChat(key, { fresh = false } = {}) {
  key = key.trim();
  if (!key) return;
  const gen = ++state.gen;
  if (state.stream) state.stream.abort();
  state.chat = key;
  localStorage.setItem("nekro.chat", key);
  clearChat();
  $("chat-title").textContent = key;
  $("send-fields").disabled = true;
  markChat();
  let history;
  try {
    [history] = await Promise.all([api(chatPath("/messages?limit=" + historyPage)), loadTurns(gen)]);
  } catch (e) {
    if (gen !== state.gen) return;
    if (fresh && e.status === 404 && !isAdmin()) {
      state.unopened = true;
      $("send-fields").disabled = false;
      say("New chat " + key + ": your first message starts it.");
      $("text").focus();
      return;
    }
    $("chat-error").textContent = "Cannot open chat " + key + ": " + e.message;
    $("chat-error").hidden = false;
    say("Cannot open chat " + key + ": " + e.message, true);
    return;
  }
  if (gen !== state.gen) return;
  if (!chatItem(key).isConnected) showChat(key, { top: true }); // a new chat, listed once it opens
  state.olderBefore = history.next_before ?? null; // no paging: the whole history came
  history.messages.forEach((m) => showMessage(m));
  showHistoryTop();
  scrollToEnd();
  setWorking();
  $("send-fields").disabled = false;
  say("Chat " + key + (history.messages.length ? "" : ": no messages yet"));
  showMemories(); // memories.js
  follow(gen);
  fillScreen(gen);
}

// loadTurns loads the newest page of the chat's turns and runs.
async function loadTurns(gen) {
  const [t, r] = await Promise.all([api(chatPath("/turns?limit=" + turnPage)), api(chatPath("/runs?limit=" + turnPage))]);
  if (gen !== state.gen) return;
  t.turns.forEach((x) => state.turns.set(x.id, x));
  r.runs.forEach(addRun);
  state.turnsBefore = t.next_before ?? null;
  state.runsBefore = r.next_before ?? null;
}

// olderTurns loads older pages of turns and runs until turn id is covered.
async function olderTurns(gen, id) {
  const oldest = (ids) => Math.min(...ids);
  while (state.turnsBefore != null && gen === state.gen && (state.turns.size === 0 || oldest(state.turns.keys()) > id)) {
    const t = await api(chatPath("/turns?limit=" + turnPage + "&before=" + encodeURIComponent(state.turnsBefore)));
    if (gen !== state.gen) return;
    t.turns.forEach((x) => state.turns.set(x.id, x));
    state.turnsBefore = t.turns.length ? t.next_before ?? null : null;
  }
  while (state.runsBefore != null && gen === state.gen && (state.runs.size === 0 || oldest(state.runs.keys()) > id)) {
    const r = await api(chatPath("/runs?limit=" + turnPage + "&before=" + encodeURIComponent(state.runsBefore)));
    if (gen !== state.gen) return;
    r.runs.forEach(addRun);
    state.runsBefore = r.runs.length ? r.next_before ?? null : null;
  }
}

function showHistoryTop() {
  const top = $("history-top");
  top.hidden = state.shown.size === 0;
  top.replaceChildren(state.olderBefore != null
    ? el("button", { type: "button", className: "secondary", id: "load-older" }, "Load earlier messages")
    : el("span", { className: "hint" }, "Beginning of the chat"));
  if (state.olderBefore != null) $("load-older").addEventListener("click", loadOlder);
}

// loadOlder prepends the history's previous page, keeping the view where
// the user was.
async function loadOlder() {
  if (state.olderBefore == null || state.loadingOlder) return;
  const gen = state.gen;
  state.loadingOlder = true;
  try {
    const h = await api(chatPath("/messages?limit=" + historyPage + "&before=" + encodeURIComponent(state.olderBefore)));
    if (gen !== state.gen) return;
    const ids = h.messages.map((m) => m.turn_id).filter((t) => t > 0);
    if (ids.length) await olderTurns(gen, Math.min(...ids));
    if (gen !== state.gen) return;
    const box = $("messages");
    const fromEnd = box.scrollHeight - box.scrollTop;
    h.messages.forEach((m) => showMessage(m, { keep: true }));
    box.scrollTop = box.scrollHeight - fromEnd;
    state.olderBefore = h.messages.length ? h.next_before ?? null : null;
    showHistoryTop();
  } catch (e) {
    say("Earlier messages: " + e.message, true);
  } finally {
    state.loadingOlder = false;
  }
}

// fillScreen loads older pages while the history does not fill its box
// (no scroll bar, so no scrolling up to ask for them).
async function fillScreen(gen) {
  const box = $("messages");
  while (gen === state.gen && state.olderBefore != null && box.scrollHeight <= box.clientHeight) {
    const before = state.olderBefore;
    await loadOlder();
    if (state.olderBefore === before) return;
  }
}

function nearEnd() {
  const box = $("messages");
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollToEnd() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

// showMessage puts a message in the history, in id order; keep leaves
// the scroll position alone (older pages), otherwise the view follows the
// end if it was there.
function showMessage(m, { keep = false } = {}) {
  if (state.shown.has(m.id)) return;
  state.shown.add(m.id);
  const follow = !keep && nearEnd();
  const li = messageItem(m);
  let next = null;
  const items = $("messages").querySelectorAll(":scope > li[data-id]");
  const last = items[items.length - 1];
  if (last && Number(last.dataset.id) > m.id) {
    for (const x of items) if (Number(x.dataset.id) > m.id) { next = x; break; }
  }
  if (next) next.before(li);
  else $("messages").append(li);
  if (m.turn_id > 0) placeTurn(m.turn_id);
  if (follow) scrollToEnd();
}

function messageItem(m) {
  const li = el("li", { className: "message " + m.role, "data-id": m.id });
  if (m.turn_id > 0) li.dataset.turnOf = m.turn_id;
  // System messages are notes for the model (the API shows them to the
  // operator only): marked as such, never as a message of the chat.
  const who = m.role === "system" ? "note for the model" : m.sender_name || m.role;
  li.append(el("span", { className: "meta" }, who + " · " + fmtTime(m.time)));
  if (m.text) {
    const body = el("div", { className: "body" });
    if (m.role === "assistant") {
      body.classList.add("md");
      body.append(renderMarkdown(m.text));
    } else body.textContent = m.text;
    li.append(body);
  }
  if (m.attachments && m.attachments.length) {
    li.append(el("ul", { className: "attachments" }, ...m.attachments.map(attachmentItem)));
  }
  return li;
}

// fetchUpload returns one of the chat's uploads as a Blob (the API needs
// the token, so a plain link cannot fetch it).
async function fetchUpload(name, key = state.chat) {
  const res = await fetch(chatPath("/uploads/" + encodeURIComponent(name), key), { headers: auth() });
  if (!res.ok) {
    let msg = res.status + " " + res.statusText;
    try { msg = (await res.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return res.blob();
}

// attachmentItem shows an attachment as a download link, an image also as
// a thumbnail (both fetched with the token).
function attachmentItem(a) {
  const key = state.chat;
  const li = el("li", { className: "attachment", "data-kind": a.kind });
  const link = el("a", { href: "#", className: "download", download: a.name, title: "Download " + a.name },
    "📎 " + a.name);
  link.addEventListener("click", async (ev) => {
    ev.preventDefault();
    try {
      const url = URL.createObjectURL(await fetchUpload(a.name, key));
      const tmp = el("a", { href: url, download: a.name, hidden: true });
      document.body.append(tmp);
      tmp.click();
      tmp.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      say("Download " + a.name + ": " + e.message, true);
    }
  });
  li.append(link, el("span", { className: "size" }, " " + fmtSize(a.size || 0)));
  if (a.kind === "image") {
    fetchUpload(a.name, key).then((blob) => {
      const img = document.createElement("img");
      img.alt = a.name;
      img.src = URL.createObjectURL(blob);
      li.append(img);
    }).catch(() => { /* the link stays */ });
  }
  return li;
}

// ---- Turns: under the last message of each turn, what the assistant
// did: its runs (code, output, stop type, duration, method calls) in a
// collapsible section, and why it failed if it did.

function addRun(r) {
  if (!(r.turn_id > 0)) return; // playground runs belong to no turn
  const list = state.runs.get(r.turn_id) || [];
  if (list.some((x) => x.run_id === r.run_id)) return;
  list.push(r);
  list.sort((a, b) => a.iteration - b.iteration);
  state.runs.set(r.turn_id, list);
}

function turnItem(id) {
  let li = $("messages").querySelector(':scope > li.turn[data-turn="' + id + '"]');
  if (li) return li;
  const details = el("details", { className: "runs" }, el("summary"));
  details.addEventListener("toggle", () => { if (details.open) fillRuns(id, details); });
  return el("li", { className: "turn", "data-turn": id }, el("p", { className: "turn-error", role: "alert", hidden: true }), details);
}

// placeTurn shows turn id after its last message (at the end while it has
// none on screen).
function placeTurn(id) {
  const li = turnItem(id);
  const members = $("messages").querySelectorAll(':scope > li[data-turn-of="' + id + '"]');
  if (members.length) members[members.length - 1].after(li);
  else if (!li.isConnected) $("messages").append(li);
  renderTurn(id);
}

function renderTurn(id) {
  const li = turnItem(id);
  const t = state.turns.get(id);
  const runs = state.runs.get(id) || [];
  const status = t ? t.status : "";
  li.dataset.status = status;
  const err = li.querySelector(".turn-error");
  if (status === "failed" || status === "interrupted") {
    err.textContent = (status === "failed" ? "This turn failed" : "This turn was interrupted") + (t.error ? ": " + t.error : "");
    err.hidden = false;
  } else err.hidden = true;
  const details = li.querySelector("details.runs");
  details.hidden = runs.length === 0 && status !== "running";
  const parts = [runs.length + (runs.length === 1 ? " run" : " runs")];
  if (status === "running") parts.push("working…");
  else if (status) parts.push(status);
  if (t && t.finished_at && t.started_at) parts.push(fmtMS(new Date(t.finished_at) - new Date(t.started_at)));
  if (t && t.model_requests) parts.push(t.model_requests + (t.model_requests === 1 ? " model request" : " model requests"));
  if (t && t.model_group) parts.push("answered by model group " + t.model_group);
  if (t && t.context && t.context.summary) parts.push("older history summarized (" + t.context.summary_covered + " messages)");
  if (t && t.context && t.context.omitted) parts.push(t.context.omitted + " older messages left out");
  const failedRuns = runs.filter((r) => r.stop_type === "ERROR" || r.stop_type === "TIMEOUT").length;
  if (failedRuns) parts.push(failedRuns + " failed");
  details.firstChild.textContent = "What the assistant did: " + parts.join(" · ");
  if (details.open) fillRuns(id, details);
}

function fillRuns(id, details) {
  const runs = state.runs.get(id) || [];
  details.replaceChildren(details.firstChild, ...runs.map(runView));
}

// callsTable lists a run's method calls, or returns null when it made none.
function callsTable(calls) {
  if (!Array.isArray(calls) || calls.length === 0) return null;
  return el("table", { className: "calls" },
    el("thead", {}, el("tr", {}, el("th", {}, "method"), el("th", {}, "µs"), el("th", {}, "error"))),
    el("tbody", {}, ...calls.map((c) => el("tr", { className: c.error ? "call-error" : "" },
      el("td", {}, el("code", {}, c.method)), el("td", {}, String(c.duration_us ?? "")), el("td", {}, c.error || "")))));
}

function runView(r) {
  const code = el("code", { "data-lang": "python" });
  code.append(highlightPython(r.code || ""));
  let agent = null;
  if (r.agent_method) {
    const res = r.agent_result === undefined ? "" : typeof r.agent_result === "string" ? r.agent_result : JSON.stringify(r.agent_result, null, 2);
    agent = el("div", { className: "agent" }, el("h4", {}, "Ended by " + r.agent_method + "(); its result went to the model"),
      res ? el("pre", { className: "output" }, res) : null);
  }
  return el("section", { className: "run", "data-run": r.run_id, "data-stop": r.stop_type },
    el("p", { className: "run-head" }, "Run " + r.iteration + " · ", el("span", { className: "stop " + r.stop_type }, r.stop_type),
      " · exit " + r.exit_code + " · " + fmtMS(r.duration_ms || 0)),
    el("h4", {}, "Code"), el("pre", { className: "code run-code" }, code),
    el("h4", {}, "Output"), el("pre", { className: "output run-output" }, r.output || "(no output)"),
    r.note ? el("p", { className: "hint" }, r.note) : null,
    callsTable(r.calls) ? el("h4", {}, "Method calls") : null, callsTable(r.calls),
    agent);
}

// setWorking shows "working…" while one of the chat's turns runs.
function setWorking() {
  let running = null;
  for (const t of state.turns.values()) if (t.status === "running") running = t;
  $("working").hidden = !running;
  if (running) {
    const n = (state.runs.get(running.id) || []).length;
    $("working-text").textContent = "The assistant is working…" + (n ? " (" + n + (n === 1 ? " run" : " runs") + " so far)" : "");
  }
}

// follow reads the chat's event stream until the chat is left, and
// reconnects when the stream drops. Each time the stream is subscribed it
// catches up on what happened since the chat was read: an event published
// between that read and the subscription (a fast turn's answer and end)
// is on no stream.
async function follow(gen) {
  const ctl = new AbortController();
  state.stream = ctl;
  try {
    const res = await fetch(chatPath("/events"), { headers: auth(), signal: ctl.signal });
    if (!res.ok) throw new Error("event stream: " + res.status + " " + res.statusText);
    catchUp(gen);
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
        if (data && gen === state.gen) onEvent(JSON.parse(data));
      }
    }
  } catch (e) {
    if (e.name === "AbortError" || gen !== state.gen) return;
    say(e.message + "; reconnecting", true);
  }
  if (gen !== state.gen || ctl.signal.aborted) return;
  await new Promise((r) => setTimeout(r, 2000));
  if (gen === state.gen) follow(gen);
}

// catchUp reads the chat's newest messages, turns and runs again and shows
// what the page lacks (a subscribed stream brings the rest).
async function catchUp(gen) {
  try {
    const [h, t, r] = await Promise.all([api(chatPath("/messages?limit=" + historyPage)),
      api(chatPath("/turns?limit=" + turnPage)), api(chatPath("/runs?limit=" + turnPage))]);
    if (gen !== state.gen) return;
    t.turns.forEach((x) => state.turns.set(x.id, x));
    r.runs.forEach(addRun);
    h.messages.forEach((m) => showMessage(m));
    for (const id of state.turns.keys()) if (turnItem(id).isConnected) renderTurn(id);
    setWorking();
  } catch (e) { /* the stream or its next try says */ }
}

function onEvent(e) {
  switch (e.type) {
    case "message":
      if (!e.message) return;
      showMessage(e.message);
      showChat(state.chat, { last: e.message, time: e.message.time, top: true });
      showHistoryTop();
      break;
    case "turn":
      if (!e.turn) return;
      state.turns.set(e.turn.id, e.turn);
      placeTurn(e.turn.id);
      setWorking();
      showChat(state.chat, { turnState: e.turn.status });
      if (e.turn.status === "failed") say("The assistant's turn failed: " + (e.turn.error || "no reason given"), true);
      break;
    case "run":
      if (!e.run) return;
      addRun(e.run);
      if (e.run.turn_id > 0) placeTurn(e.run.turn_id);
      setWorking();
      break;
    case "reset":
      clearChat();
      showChat(state.chat, { last: null, turnState: "" });
      say("The chat was reset");
      break;
  }
}

// ---- Sending: Enter sends, Shift+Enter is a new line; files come by the
// attach button or dropped on the conversation, and go as multipart.

async function send(ev) {
  ev.preventDefault();
  const text = $("text").value;
  const files = state.pending.slice();
  if (!text.trim() && !files.length) return;
  $("send-error").textContent = "";
  const fields = { user_name: $("name").value, text };
  if (isAdmin()) fields.user_id = $("user").value; // a user's token says who they are
  let body;
  if (files.length) {
    body = new FormData();
    for (const [k, v] of Object.entries(fields)) body.append(k, v);
    for (const f of files) body.append("file", f, f.name);
  } else body = JSON.stringify(fields);
  // The box empties at once (a second Enter sends nothing twice) and
  // gets the message back if it is refused.
  const button = $("send-button");
  button.disabled = true;
  const gen = state.gen;
  $("text").value = "";
  state.pending = [];
  showPending();
  try {
    const r = await api(chatPath("/messages"), { method: "POST", body });
    if (gen === state.gen && state.unopened) {
      openChat(state.chat); // the chat is now the user's: its history and events
      loadChats().catch(() => { /* the next refresh */ });
    } else if (r && r.message && gen === state.gen) showMessage(r.message);
    if (r && r.dropped) say("Kept, but not answered: " + r.dropped);
    else say("Sent; the assistant will answer.");
  } catch (e) {
    if (e instanceof TypeError && files.length) {
      // The server may close the connection on a body over its limit
      // before the browser has sent it all.
      e.message += " (the connection closed while sending: are the files over the server's upload limit?)";
    }
    if (gen === state.gen && !$("text").value && !state.pending.length) {
      $("text").value = text;
      addFiles(files);
    }
    const msg = (e.status === 413 ? "Too large, not sent: " : "Not sent: ") + e.message;
    $("send-error").textContent = msg;
    say(msg, true);
  } finally {
    button.disabled = false;
  }
}

function addFiles(list) {
  for (const f of list) {
    if (!state.pending.some((p) => p.name === f.name && p.size === f.size)) state.pending.push(f);
  }
  showPending();
}

function showPending() {
  $("pending").replaceChildren(...state.pending.map((f, i) => {
    const remove = el("button", { type: "button", className: "secondary remove", title: "Do not send " + f.name }, "×");
    remove.addEventListener("click", () => {
      state.pending.splice(i, 1);
      showPending();
    });
    return el("li", {}, "📎 " + f.name + " (" + fmtSize(f.size) + ") ", remove);
  }));
}

function setUpSending() {
  $("send").addEventListener("submit", send);
  $("text").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.ctrlKey && !ev.altKey && !ev.metaKey && !ev.isComposing) {
      ev.preventDefault();
      $("send").requestSubmit();
    }
  });
  $("attach").addEventListener("click", () => $("file").click());
  $("file").addEventListener("change", () => {
    addFiles($("file").files);
    $("file").value = "";
  });
  const zone = $("conversation");
  let depth = 0; // dragenter/leave fire for every child crossed
  const hasFiles = (ev) => ev.dataTransfer && [...ev.dataTransfer.types].includes("Files");
  zone.addEventListener("dragenter", (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    depth++;
    zone.classList.add("dropping");
  });
  zone.addEventListener("dragover", (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = "copy";
  });
  zone.addEventListener("dragleave", () => {
    if (--depth <= 0) { depth = 0; zone.classList.remove("dropping"); }
  });
  zone.addEventListener("drop", (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    depth = 0;
    zone.classList.remove("dropping");
    if ($("send-fields").disabled) return;
    addFiles(ev.dataTransfer.files);
    $("text").focus();
  });
}

// ---- The playground (admin): code run in the chat's sandbox.

async function run(ev) {
  ev.preventDefault();
  const out = $("run");
  out.textContent = "running…";
  try {
    const r = await api(chatPath("/exec"), {
      method: "POST",
      body: JSON.stringify({ user_id: $("user").value, code: $("code").value }),
    });
    const head = el("p", {}, el("span", { className: "stop " + r.stop_type }, r.stop_type), " · exit " + r.exit_code + " · " + r.duration_ms + " ms");
    out.replaceChildren(head, el("pre", {}, r.output || "(no output)"), callsTable(r.calls) || "");
  } catch (e) { out.textContent = e.message; }
}

async function reset() {
  if (!confirm("Clear chat " + state.chat + "'s history and run the plugins' reset hooks?")) return;
  try { await api(chatPath("/reset"), { method: "POST" }); say("chat reset"); } catch (e) { say(e.message, true); }
}

// loadStatus fills the side panel (admin): the model and the plugins.
async function loadStatus() {
  const status = await api("/api/status");
  $("model").textContent = status.model ? "Model: " + status.model : "No model configured: " + (status.model_error || "");
  const b = status.build || {};
  $("build").textContent = b.version ? "nekro " + b.version + (b.commit ? " · " + b.commit.slice(0, 12) : "") +
    (b.build_date ? " · built " + b.build_date : "") + (b.go ? " · " + b.go : "") : "";
  $("plugins").replaceChildren(...status.plugins.map((p) => el("li", {}, p.name + " (" + p.key + "): " + p.methods.join(", "))));
}

// startChat fills the chat page: the list, then the chat last open (or
// the most recent one).
async function startChat() {
  if (!state.me) await signIn();
  if (isAdmin()) loadStatus().catch((e) => say(e.message, true));
  await loadChats({ fresh: true });
  const first = $("chats").firstElementChild;
  // A chat the token may not open is tried all the same: the API's
  // refusal is shown.
  let key = state.chat || localStorage.getItem("nekro.chat") || "";
  if (!key) key = first ? first.dataset.chat : isAdmin() ? "demo" : "";
  if (key) await openChat(key);
  else say("No chats yet: start one with New chat.");
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
  const { plugins, failed = [] } = await api("/api/plugins");
  $("plugin-list").replaceChildren(...plugins.map(pluginCard));
  showFailed(failed);
  const on = plugins.filter((p) => p.enabled).length;
  say(plugins.length + " plugins, " + on + " enabled" + (failed.length ? ", " + failed.length + " not loaded" : ""));
}

// showFailed lists the Python plugins that did not load: the file and
// line their import raised at, the exception, and the traceback folded.
function showFailed(failed) {
  const box = $("plugin-failed");
  box.hidden = !failed.length;
  box.replaceChildren();
  if (!failed.length) return;
  box.append(el("h3", {}, "Not loaded (" + failed.length + ")"));
  for (const f of failed) {
    const where = f.file ? f.file + (f.line ? ":" + f.line : "") : f.path;
    const card = el("article", { className: "plugin failed", "data-path": f.path },
      el("h4", {}, el("code", {}, f.path)),
      el("p", { className: "error" }, where + ": " + f.message));
    if (f.traceback) card.append(el("details", {}, el("summary", {}, "Traceback"), el("pre", { className: "traceback" }, f.traceback)));
    box.append(card);
  }
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
  const header = el("header", {}, title, el("label", { className: "switch" }, sw, state));
  if (p.reloadable) { // a Python plugin: load it again from its files
    const btn = el("button", { type: "button", className: "reload", title: "Load the plugin again from its files; calls in flight finish on the old code" }, "Reload");
    btn.addEventListener("click", () => reloadPlugin(p.key, btn, swError));
    header.append(btn);
  }
  card.append(header, swError);
  if (p.description) card.append(el("p", { className: "description" }, p.description));
  if (/^https?:\/\//i.test(p.url || "")) {
    card.append(el("p", { className: "hint" }, el("a", { href: p.url, rel: "noopener noreferrer", target: "_blank" }, p.url)));
  }
  if (p.methods && p.methods.length) card.append(methodList(p.methods));
  if (p.commands && p.commands.length) card.append(commandList(p.commands));
  if (p.config) card.append(settingsSection(p.key, p.config));
  return card;
}

// reloadPlugin loads a Python plugin again (POST .../reload), then shows
// the list as it is now; a version that does not load leaves the old one
// serving, and its error is shown on the card.
async function reloadPlugin(key, btn, errBox) {
  btn.disabled = true;
  errBox.textContent = "";
  try {
    await api(pluginPath(key, "/reload"), { method: "POST" });
    await loadPlugins();
    say(key + " reloaded");
  } catch (e) {
    errBox.textContent = "Not reloaded: " + e.message;
    btn.disabled = false;
  }
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

// commandList shows a plugin's chat commands: usage, who may use them,
// what they do.
function commandList(commands) {
  const who = { user: "users", admin: "the chat's admins", super: "super users" };
  const list = el("ul", { className: "commands" });
  for (const c of commands) {
    list.append(el("li", { className: "command", "data-command": c.name },
      el("code", { className: "usage" }, c.usage || "/" + c.name), " ",
      c.description || "",
      who[c.permission] ? el("span", { className: "who" }, " (for " + who[c.permission] + ")") : null));
  }
  return el("details", { className: "commands" }, el("summary", {}, commands.length + (commands.length === 1 ? " command" : " commands")), list);
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

// ---- Pages: #view=chat, runs, dashboard or plugins. The fragment may
// also carry the settings (never sent to a server):
// /#token=...&chat=...&view=plugins

let view = "chat";
const loaded = { chat: false, runs: false, dashboard: false, plugins: false };
// The pages, what loads each, and whether only the operator sees it
// (runlog.js has the run log's and the dashboard's).
const views = {
  chat: { load: () => startChat() },
  runs: { load: () => loadRunLog() },
  dashboard: { load: () => loadDashboard(), admin: true },
  plugins: { load: () => loadPlugins(), admin: true },
};

// pageOf is the page v names that the token may see: the chat otherwise.
function pageOf(v) {
  if (!views[v]) return "chat";
  return views[v].admin && !isAdmin() ? "chat" : v;
}

function load(v) {
  loaded[v] = true;
  const go = async () => {
    if (!state.me) await signIn();
    if (pageOf(v) !== v) return showView("chat"); // the operator's page
    await views[v].load();
  };
  go().catch((e) => {
    loaded[v] = false;
    if (e.status === 401) {
      state.me = null;
      $("sign-in").hidden = false;
    }
    say(e.status === 401 ? "Sign-in refused: " + e.message : e.message, true);
  });
}

function showView(v) {
  view = pageOf(v);
  document.body.dataset.view = view;
  for (const name of Object.keys(views)) $(name + "-view").hidden = view !== name;
  for (const a of document.querySelectorAll("#tabs a")) {
    if (a.dataset.view === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!$("token").value) say("Sign in with an API token: the operator's (printed at first start, kept in the data directory's api_token) or a user's.");
  else if (!loaded[view]) load(view);
}

// fromFragment applies the fragment's settings and returns its page; the
// address keeps only the page, never the token.
function fromFragment() {
  const frag = new URLSearchParams(location.hash.slice(1));
  let changed = false;
  for (const f of ["token", "user", "name"]) {
    if (frag.get(f)) { $(f).value = frag.get(f); changed = true; }
  }
  if (frag.get("token")) state.me = null;
  if (frag.get("chat")) {
    state.chat = frag.get("chat");
    changed = true;
  }
  if (changed) for (const k of Object.keys(loaded)) loaded[k] = false;
  const v = views[frag.get("view")] ? frag.get("view") : "chat";
  if (location.hash && location.hash !== "#view=" + v) history.replaceState(null, "", location.pathname + "#view=" + v);
  return v;
}

document.addEventListener("DOMContentLoaded", () => {
  for (const f of ["token", "user", "name"]) {
    const v = localStorage.getItem("nekro." + f);
    if (v) $(f).value = v;
  }
  $("connect").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.me = null;
    for (const k of Object.keys(loaded)) loaded[k] = false;
    load(view);
  });
  $("logout").addEventListener("click", logout);
  $("new-chat").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = $("new-chat-key").value.trim();
    if (!key || !state.me) return;
    openChat(key, { fresh: true });
    $("new-chat-key").value = "";
  });
  $("chats-more").addEventListener("click", () => loadChats({ more: true }).catch((e) => say(e.message, true)));
  $("messages").addEventListener("scroll", () => { if ($("messages").scrollTop < 60) loadOlder(); });
  setUpSending();
  $("exec").addEventListener("submit", run);
  $("reset").addEventListener("click", reset);
  $("plugins-reload").addEventListener("click", () => load("plugins"));
  // Other chats' last messages and states, while the page is open.
  setInterval(() => {
    if (state.me && view === "chat" && !document.hidden) loadChats().catch(() => { /* the next try */ });
  }, 20000);
  window.addEventListener("hashchange", () => showView(fromFragment()));
  showView(fromFragment());
});
