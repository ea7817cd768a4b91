// nekro web UI: the open chat's long-term memories (GET and DELETE
// /api/chats/{chat}/memories), in a panel under the conversation. The
// operator sees every memory of the chat; a user the chat's own and
// their own. Loaded after app.js, whose helpers (api, chatPath, el, say,
// state, $) it uses. Memories are untrusted text: they only become text.
"use strict";

// showMemories fills the panel for the open chat; called when a chat
// opens and by the panel's Refresh button.
async function showMemories() {
  const gen = state.gen;
  const list = $("memory-list");
  let out;
  try {
    out = await api(chatPath("/memories"));
  } catch (e) {
    if (gen !== state.gen) return;
    list.replaceChildren();
    $("memory-status").textContent = "Cannot list memories: " + e.message;
    return;
  }
  if (gen !== state.gen) return;
  $("memory-count").textContent = "(" + out.memories.length + ")";
  $("memory-status").textContent = out.memories.length
    ? ""
    : "Nothing remembered in this chat" + (out.enabled ? " yet." : ": memory is off (nekro serve --memory).");
  list.replaceChildren(...out.memories.map(memoryItem));
}

function memoryItem(m) {
  const forget = el("button", { type: "button", className: "secondary", title: "Delete this memory; it is not learned again from the same messages" }, "Forget");
  forget.addEventListener("click", async () => {
    forget.disabled = true;
    try {
      await api(chatPath("/memories/" + m.id), { method: "DELETE" });
      say("memory " + m.id + " forgotten");
      await showMemories();
    } catch (e) {
      forget.disabled = false;
      say(e.message, true);
    }
  });
  return el("li", { "data-memory": m.id },
    el("span", { className: "memory-about" }, m.user_id ? "user " + m.user_id : "chat"), " ",
    el("span", { className: "memory-text" }, m.text), " ", forget);
}

$("memory-refresh").addEventListener("click", showMemories);
