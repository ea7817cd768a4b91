"""The path helper examples of the plugin documents (seed 002, 文件交互),
as the document writes them: process_image ("process_uploaded_image"),
generate_report ("generate_report_file") and get_file_content
("get_file_content_CORRECT"). Added around them, only what the document
implies: `plugin` and its imports.

Left out: get_file_handle ("get_file_handle_WRONG"), the page's example
of what not to do (it opens whatever host path the AI names and returns
the open file, which cannot be sent back), and read_file_content, a
helper that is no method.

Seed 003's generate_report (fs_doc.py) has the same Python name: never
enable both plugins in one run.
"""
from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType

plugin = NekroPlugin(
    name="路径转换示例",
    module_name="paths_doc",
    description="nekro_agent.tools.path_convertor, as the documents show it",
    version="1.0.0",
    author="nekro_docs",
    url="",
)

# ---- from the document ----
from pathlib import Path # 建议使用 Path 对象处理路径
from nekro_agent.api.schemas import AgentCtx # 获取上下文信息,如 chat_key
from nekro_agent.tools.path_convertor import (
    convert_to_host_path,      # 将沙盒容器内路径转换为主机可访问的物理路径
    convert_to_container_path, # 将主机路径(主要指文件名)转换为沙盒容器内 /app/uploads/ 下的路径
    convert_filename_to_container_path, # 将文件名转换为沙盒容器内 /app/uploads/ 下的路径
    convert_filename_to_access_path, # 将文件名转换为用户上传目录中主机可访问的物理路径
    is_url_path,               # 检查路径是否为 URL
    PathLocation               # 枚举,定义了常见的路径位置类型 (用于概念理解)
)
# from nekro_agent.core.config import USER_UPLOAD_DIR, SANDBOX_SHARED_HOST_DIR # 底层配置

import aiofiles
from pathlib import Path
from nekro_agent.api import core
from nekro_agent.api.schemas import AgentCtx
from nekro_agent.tools.path_convertor import convert_to_host_path

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "process_uploaded_image", "处理用户上传的图片文件。")
async def process_image(_ctx: AgentCtx, image_sandbox_path_str: str) -> str:
    """接收沙盒中的图片路径字符串,在主服务中处理它。

    Args:
        image_sandbox_path_str (str): AI 在沙盒中看到的图片路径 (例如 "/app/uploads/my_image.jpg")。

    Returns:
        str: 处理结果的描述。
    """
    try:
        image_sandbox_path = Path(image_sandbox_path_str)
        # 1. 将沙盒路径转换为主机可访问路径
        # chat_key 通常从 _ctx.from_chat_key 获取
        # 如果是 /app/shared/ 路径,且需要 container_key, _ctx 通常也会提供
        # container_key = _ctx.container_key
        host_image_path = convert_to_host_path(
            sandbox_path=image_sandbox_path,
            chat_key=_ctx.from_chat_key
            # container_key=container_key # 如果是 shared 路径则需要
        )
        core.logger.info(f"接收到沙盒路径 '{image_sandbox_path_str}',转换为主机路径 '{host_image_path}'")

        # 2. 在主服务中读取和处理文件
        if not host_image_path.exists():
            return f"错误:文件在主机路径 '{host_image_path}' 未找到。可能是路径转换错误或文件确实不存在。"

        async with aiofiles.open(host_image_path, "rb") as f:
            image_data = await f.read()
        
        # ... 在这里进行图片处理 (例如:分析、缩放、添加滤镜等) ...
        # processed_result = await image_processing_library(image_data)
        
        return f"图片 '{host_image_path.name}' 处理成功。大小: {len(image_data)} 字节。"
    
    except ValueError as ve: # 特别捕捉路径转换相关的 ValueError
        core.logger.error(f"路径转换失败 '{image_sandbox_path_str}': {ve}")
        return f"处理图片失败,路径无效: {ve}"
    except Exception as e:
        core.logger.error(f"处理图片 '{image_sandbox_path_str}' 失败: {e}")
        return f"处理图片失败: {e}"

import aiofiles
import time
from pathlib import Path
from nekro_agent.api import core
from nekro_agent.api.schemas import AgentCtx
from nekro_agent.tools.path_convertor import (
    convert_filename_to_access_path,
    convert_filename_to_container_path
)
# from nekro_agent.services.message import message # 如果要通过消息发送

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "generate_report_file", "生成一份报告并返回其沙盒路径。")
async def generate_report(_ctx: AgentCtx, report_data: str) -> str:
    """生成报告文件,将其保存在会话的上传区,并返回 AI 可在沙盒中使用的路径。

    Args:
        report_data (str): 报告的内容。

    Returns:
        str: 生成的报告文件在沙盒中的可访问路径 (例如 "/app/uploads/report_1678886400.txt")。
    """
    try:
        report_filename = f"report_{int(time.time())}.txt"
        
        # 1. 使用 convert_filename_to_access_path 确定文件在主机上的保存路径
        # 这会将其放入 data/uploads/{chat_key}/report_filename.txt
        host_report_path = convert_filename_to_access_path(
            filename=report_filename,
            chat_key=_ctx.from_chat_key
        )
        
        # 确保目录存在
        host_report_path.parent.mkdir(parents=True, exist_ok=True)

        # 2. 在主服务中生成并写入文件
        async with aiofiles.open(host_report_path, "w", encoding='utf-8') as f:
            await f.write(report_data)
        core.logger.info(f"报告已生成在主机路径: {host_report_path}")

        # 3. 使用 convert_filename_to_container_path 将主机文件名转换为沙盒可访问的 /app/uploads/ 路径
        container_report_path = convert_filename_to_container_path(report_filename)
        
        core.logger.info(f"返回给AI的沙盒路径: {container_report_path}")
        return str(container_report_path)

    except Exception as e:
        core.logger.error(f"生成报告 '{report_data[:50]}...' 失败: {e}")
        return f"生成报告失败: {e}"

    # 或者,考虑更稳健的方式,特别是如果文件不适合放在通用的“上传”区域,
    # 或者你想避免让AI直接操作文件路径:
    # 
    # 1. 将文件保存到插件专属目录:
    #    plugin_data_dir = plugin.get_plugin_path() 
    #    my_custom_report_path = plugin_data_dir / "reports" / report_filename
    #    my_custom_report_path.parent.mkdir(parents=True, exist_ok=True)
    #    async with aiofiles.open(my_custom_report_path, "w", encoding='utf-8') as f:
    #        await f.write(report_data)
    #
    # 2. 通过消息服务发送文件给用户:
    #    await message.send_file(_ctx.from_chat_key, str(my_custom_report_path), _ctx, filename=report_filename)
    #    return f"报告 '{report_filename}' 已生成并通过消息发送给您。"
    #
    # 3. 或者返回一个抽象的引用/描述给 AI:
    #    return f"报告 '{report_filename}' 已在服务器端生成(位于插件专属目录)。"

import aiofiles
from pathlib import Path
from nekro_agent.api.schemas import AgentCtx
from nekro_agent.tools.path_convertor import convert_to_host_path

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "get_file_content_CORRECT", "")
async def get_file_content(_ctx: AgentCtx, sandbox_path_str: str) -> str:
    # sandbox_path_str 示例: "/app/uploads/document.txt"
    sandbox_path = Path(sandbox_path_str)
    host_path = convert_to_host_path(sandbox_path, _ctx.from_chat_key) # 假设是 UPLOADS
    
    async with aiofiles.open(host_path, "r", encoding="utf-8") as f: # 使用 aiofiles
        content = await f.read()
    return content # 返回可序列化的字符串内容
