"""The KV store examples of the plugin documents (seed 000, 数据存储 / KV
键值存储), as the document writes them. Added around the fragments, only
what the document implies: the imports it uses and `plugin`.
"""
import time

from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType

plugin = NekroPlugin(
    name="KV 存储示例",
    module_name="kvstore_doc",
    description="plugin.store, as the documents show it",
    version="1.0.0",
    author="nekro_docs",
    url="",
)

# ---- from the document ----
from nekro_agent.api.schemas import AgentCtx
from nekro_agent.api import core
import json

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "save_preference", "保存用户偏好")
async def save_preference(_ctx: AgentCtx, key: str, value: str) -> str:
    """保存用户偏好设置"""

    # 存储会话特定数据
    await plugin.store.set(
        chat_key=_ctx.from_chat_key,
        store_key="last_command",
        value="/weather London"
    )

    # 存储用户特定偏好(跨会话)
    user_prefs = {"theme": "dark", "notifications": True}
    await plugin.store.set(
        user_key=_ctx.from_user_id,
        store_key="preferences",
        value=json.dumps(user_prefs)
    )

    # 存储插件全局配置
    await plugin.store.set(
        store_key="plugin_last_updated",
        value=str(time.time())
    )

    return "偏好设置已保存"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "get_preference", "获取用户偏好")
async def get_preference(_ctx: AgentCtx, key: str) -> str:
    """获取用户偏好设置"""

    # 获取会话特定数据
    last_command = await plugin.store.get(
        chat_key=_ctx.from_chat_key,
        store_key="last_command"
    )

    # 获取用户偏好,如果不存在则使用默认值
    prefs_str = await plugin.store.get(
        user_key=_ctx.from_user_id,
        store_key="preferences"
    )

    if prefs_str:
        user_preferences = json.loads(prefs_str)
    else:
        # 默认值
        user_preferences = {"theme": "light", "notifications": False}

    # 获取插件全局数据
    timestamp_str = await plugin.store.get(store_key="plugin_last_updated")
    last_updated = float(timestamp_str) if timestamp_str else None

    return f"偏好: {user_preferences}"


@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "clear_cache", "清除缓存")
async def clear_cache(_ctx: AgentCtx) -> str:
    """清除会话缓存数据"""

    # 删除会话的特定缓存
    await plugin.store.delete(
        chat_key=_ctx.from_chat_key,
        store_key="session_cache_data"
    )

    # 删除用户的某个设置
    await plugin.store.delete(
        user_key=_ctx.from_user_id,
        store_key="old_setting"
    )

    return "缓存已清除"


from pydantic import BaseModel
from typing import List, Dict, Optional
import time

class Note(BaseModel):
    id: str
    title: str
    content: str
    created_at: float
    tags: List[str] = []

class UserNotes(BaseModel):
    notes: Dict[str, Note] = {}

@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "add_note", "添加笔记")
async def add_note(_ctx: AgentCtx, note_id: str, title: str, content: str, tags_str: str = "") -> str:
    """为当前用户添加笔记"""

    # 1. 获取现有笔记数据
    user_notes_json = await plugin.store.get(
        user_key=_ctx.from_user_id,
        store_key="all_notes"
    )

    if user_notes_json:
        user_notes_data = UserNotes.model_validate_json(user_notes_json)
    else:
        user_notes_data = UserNotes()

    # 2. 创建新笔记
    new_note = Note(
        id=note_id,
        title=title,
        content=content,
        created_at=time.time(),
        tags=tags_str.split(',') if tags_str else []
    )
    user_notes_data.notes[note_id] = new_note

    # 3. 序列化并存储
    await plugin.store.set(
        user_key=_ctx.from_user_id,
        store_key="all_notes",
        value=user_notes_data.model_dump_json()
    )

    return f"笔记 '{title}' 已添加,ID: {note_id}"

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "get_note", "获取笔记")
async def get_note(_ctx: AgentCtx, note_id: str) -> str:
    """获取指定 ID 的笔记内容"""

    user_notes_json = await plugin.store.get(
        user_key=_ctx.from_user_id,
        store_key="all_notes"
    )

    if not user_notes_json:
        return "用户没有任何笔记"

    user_notes_data = UserNotes.model_validate_json(user_notes_json)
    note = user_notes_data.notes.get(note_id)

    if note:
        return f"标题: {note.title}\n内容: {note.content}\n标签: {', '.join(note.tags)}"

    return f"未找到 ID 为 '{note_id}' 的笔记"
