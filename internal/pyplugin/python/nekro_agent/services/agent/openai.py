"""The reference's chat-completion helper, answered by nekro's model
groups: gen_openai_chat_response(model, messages) asks the group named
`model` (nekro's "chat" group, the one that answers turns, when it names
none of nekro's), with the messages' text and images. base_url and
api_key are ignored: the operator's keys stay in nekro. Only while a
sandbox method runs (the request counts toward its turn)."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from nekro_agent import _link, _unavailable

__all__ = ["OpenAIResponse", "gen_openai_chat_response", "gen_openai_embeddings"]


class OpenAIResponse:
    def __init__(self, response_content: str, messages: List[Dict[str, Any]], use_model: str, took_ms: int):
        self.response_content = response_content
        self.thought_chain = ""
        self.messages = messages
        self.message_cnt = len(messages)
        self.token_consumption = self.token_input = self.token_output = 0
        self.use_model = use_model
        self.speed_tokens_per_second = 0.0
        self.first_token_cost_ms = took_ms
        self.generation_time_ms = took_ms
        self.stream_mode = False
        self.log_path = None


def _as_dict(m: Any) -> Dict[str, Any]:
    if isinstance(m, dict):
        return m
    if hasattr(m, "to_dict"):
        return m.to_dict()
    return {"role": getattr(m, "role", "user"), "content": getattr(m, "content", str(m))}


def _parts(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The messages as one question's parts: each message's role, its
    text and its images, in order."""
    parts: List[Dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        role = m.get("role", "user")
        if isinstance(content, str):
            parts.append({"type": "text", "text": "[%s] %s" % (role, content)})
            continue
        parts.append({"type": "text", "text": "[%s]" % role})
        for seg in content or []:
            if seg.get("type") == "text":
                parts.append({"type": "text", "text": seg.get("text", "")})
            elif seg.get("type") == "image_url":
                parts.append({"type": "image_url", "image_url": {"url": (seg.get("image_url") or {}).get("url", "")}})
    return parts


def _group(model: str) -> str:
    from nekro_agent.core.config import config

    for name, g in config.MODEL_GROUPS.items():
        if model in (name, g.CHAT_MODEL):
            return g.CHAT_MODEL or name
    return "chat"


async def gen_openai_chat_response(model: str, messages: Any, *_a: Any, **_k: Any) -> OpenAIResponse:
    msgs = [_as_dict(m) for m in (messages if isinstance(messages, list) else [messages])]
    group = _group(model or "")
    start = time.time()
    answer = await _link.get().request("model.ask", group=group, parts=_parts(msgs))
    return OpenAIResponse(answer or "", msgs, group, int((time.time() - start) * 1000))


gen_openai_embeddings = _unavailable.function("gen_openai_embeddings", "nekro has no embedding models for plugins (no vector database)")
