"""The sandbox method examples of the plugin documents (seed 004, 沙盒方法详解),
one per method type, as the document writes them. The page flattened the
code onto single lines; the line breaks are restored and nothing else of
the fragments changed, except where noted. Added around them, only what
the document implies: the imports it uses, `plugin`, and the two helpers
its fragments call without defining (search_internal_db,
generate_image_service), written to give what the Go port gives.
"""
import base64
import datetime  # noqa: F401 (get_time imports it itself)
import struct
import zlib
from typing import Any, Dict, List, Optional

from nekro_agent.api import message
from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(
    name="沙盒方法示例",
    module_name="sandbox_methods_doc",
    description="The four sandbox method types, as the documents show them",
    version="1.0.0",
    author="nekro_docs",
    url="",
)

# ---- implied by the document: the helpers its fragments call ----

_KNOWLEDGE_BASE = [
    ("Sandbox", "AI code runs in a bubblewrap sandbox: no network, /app/shared read-write, /app/uploads read-only."),
    ("Method types", "TOOL returns to the code; AGENT ends the run and starts a new round; BEHAVIOR records a system message; MULTIMODAL_AGENT returns text and images for a new round."),
    ("KV store", "Plugins store strings per chat, per user or plugin-wide, with atomic updates."),
    ("File bridge", "Plugins read the sandbox's files through rooted handles, so hostile paths cannot escape."),
    ("Timeouts", "A run that exceeds its time limit is killed with its whole process tree and ends as TIMEOUT."),
]


async def search_internal_db(query: str) -> str:
    """Rank the knowledge base's entries by how often they contain the query's words."""
    words = query.lower().split()
    hits = []
    for i, (title, text) in enumerate(_KNOWLEDGE_BASE):
        score = sum((title + " " + text).lower().count(w) for w in words)
        if score:
            hits.append((-score, i))
    return "".join("- %s: %s\n" % _KNOWLEDGE_BASE[i] for _, i in sorted(hits))


async def generate_image_service(topic: str) -> str:
    """A 64x64 PNG gradient whose colours come from the topic, as a data URL."""
    seed = 0x811C9DC5
    for b in topic.encode():
        seed = ((seed ^ b) * 0x01000193) & 0xFFFFFFFF
    r0, g0, b0 = seed & 0xFF, (seed >> 8) & 0xFF, (seed >> 16) & 0xFF
    rows = b"".join(b"\x00" + bytes(c for x in range(64) for c in ((r0 + 2 * x) & 0xFF, (g0 + 2 * y) & 0xFF, (b0 + x + y) & 0xFF, 255))
                    for y in range(64))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 6, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


# ---- from the document ----

@plugin.mount_sandbox_method(
    method_type=SandboxMethodType.TOOL,
    name="calculate_sum",
    description="计算两个数字的和。"
)
async def my_sum_function(_ctx: AgentCtx, num1: int, num2: int) -> int:
    """计算并返回两个整数的和。

    Args:
        num1 (int): 第一个加数。
        num2 (int): 第二个加数。

    Returns:
        int: 两个数字的和。
    """
    return num1 + num2


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "get_current_time", "获取当前的日期和时间。")
async def get_time(_ctx: AgentCtx) -> str:
    import datetime
    return datetime.datetime.now().isoformat()


@plugin.mount_sandbox_method(SandboxMethodType.AGENT, "search_knowledge_base", "根据关键词搜索内部知识库并返回相关信息。")
async def search_kb(_ctx: AgentCtx, query: str) -> str:
    # 假设 search_internal_db 是一个执行实际搜索的函数
    results = await search_internal_db(query)
    if not results:
        return f"在知识库中没有找到与 '{query}' 相关的信息。"
    return f"关于 '{query}' 的知识库搜索结果如下:\n{results}"


@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "send_channel_message", "向当前会话发送一条消息。")
async def send_chat_message(_ctx: AgentCtx, text_to_send: str) -> str:
    try:
        await message.send_text(_ctx.from_chat_key, text_to_send, _ctx)
        return f"消息 '{text_to_send[:30]}...' 已成功发送。"
    except Exception as e:
        return f"发送消息失败: {e}"


# 伪代码示例,实际结构取决于 Nekro Agent 对多模态消息的处理
@plugin.mount_sandbox_method(SandboxMethodType.MULTIMODAL_AGENT, "generate_image_and_comment", "生成一张关于特定主题的图片,并附带一句评论。")
async def generate_image_with_comment(_ctx: AgentCtx, topic: str) -> List[Dict[str, Any]]:  # 返回值类型可能是一个dict
    image_url = await generate_image_service(topic)  # 假设这是一个生成图片的服务
    comment = f"这是一张关于 '{topic}' 的图片。"
    # 返回符合 OpenAI 或 Nekro Agent 内部规范的多模态消息结构
    return [
        {
            "type": "text",
            "text": comment
        },
        {
            "type": "image_url",
            "image_url": {
                "url": image_url  # (图片的Base64编码数据): the document's placeholder "...", filled with the image it made
            }
        },
    ]


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "get_user_preference", "获取指定用户的特定偏好设置。")
async def get_user_preference(_ctx: AgentCtx, user_id: str, preference_key: str) -> Optional[str]:
    """获取用户的偏好设置值。

    根据用户ID和偏好键名,从插件存储中检索对应的偏好设置值。

    Args:
        user_id (str): 用户的唯一标识符。
        preference_key (str): 需要查询的偏好设置的键名 (例如:"theme", "language")。

    Returns:
        Optional[str]: 如果找到偏好设置,则返回其字符串值;如果未找到,则返回 None。

    Example:
        ```python
        # 获取用户 'user_123' 的 'theme' 偏好设置
        theme = get_user_preference(user_id="user_123", preference_key="theme")
        if theme:
            print(f"用户的主题是: {theme}")
        else:
            print("未找到用户的主题偏好设置。")
        ```
    """
    # ... 实现逻辑 ...
    stored_value = await plugin.store.get(user_key=user_id, store_key=preference_key)
    return stored_value
