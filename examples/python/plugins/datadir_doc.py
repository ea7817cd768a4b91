"""The plugin data directory examples of the plugin documents (seed 000,
数据存储 / 方式二:插件持久化目录), as the document writes them, with the
two best-practice fragments that are hooks (on_reset, cleanup). Added
around the fragments, only what the document implies: the imports it
uses and `plugin`.

Left out:
- seed 000's migrate_data init hook: a plugin holds one init method (a
  second mount_init_method replaces the first, as in the reference), so
  it would replace init_plugin_resources here; it is its own plugin,
  migrate_doc.py.
- the module-level fragment 获取插件目录 (plugin_dir = plugin.get_plugin_path()
  at import time): plugindir_doc.py holds it.
- fragments that are no method or hook (key naming, mkdir, aiofiles,
  naming, try/except, size check advice).

As in the reference, the methods join the AI's file names (filename,
model_name) onto the plugin directory unchecked: the host trusts them.
"""
import json
import time

from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(
    name="插件持久化目录示例",
    module_name="datadir_doc",
    description="plugin.get_plugin_path(), as the documents show it",
    version="1.0.0",
    author="nekro_docs",
    url="",
)

# ---- from the document ----
from pathlib import Path
from nekro_agent.api import core

import aiofiles

@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "save_log", "保存日志")
async def save_log(_ctx: AgentCtx, log_content: str) -> str:
    """保存日志到文件"""

    # 获取插件目录
    plugin_dir = plugin.get_plugin_path()

    # 创建日志子目录
    logs_dir = plugin_dir / "logs"
    logs_dir.mkdir(parents=True, exist_ok=True)

    # 保存日志文件
    log_file = logs_dir / f"log_{int(time.time())}.txt"
    async with aiofiles.open(log_file, "w", encoding="utf-8") as f:
        await f.write(log_content)

    core.logger.info(f"日志已保存: {log_file}")
    return f"日志已保存到 {log_file.name}"

@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "save_image", "保存图片")
async def save_image(_ctx: AgentCtx, image_data: bytes, filename: str) -> str:
    """保存图片文件"""

    plugin_dir = plugin.get_plugin_path()
    images_dir = plugin_dir / "images"
    images_dir.mkdir(parents=True, exist_ok=True)

    image_path = images_dir / filename
    async with aiofiles.open(image_path, "wb") as f:
        await f.write(image_data)

    return f"图片已保存: {image_path}"

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "read_config", "读取配置文件")
async def read_config(_ctx: AgentCtx) -> str:
    """读取插件配置文件"""

    plugin_dir = plugin.get_plugin_path()
    config_file = plugin_dir / "config.json"

    # 检查文件是否存在
    if not config_file.exists():
        return "配置文件不存在"

    # 读取文件
    async with aiofiles.open(config_file, "r", encoding="utf-8") as f:
        config_content = await f.read()

    return f"配置内容: {config_content}"

from typing import List

@plugin.mount_init_method()
async def init_plugin_resources():
    """插件初始化时准备资源目录结构"""

    plugin_dir = plugin.get_plugin_path()

    # 创建多个子目录
    directories = [
        plugin_dir / "cache",
        plugin_dir / "models",
        plugin_dir / "exports",
        plugin_dir / "temp",
        plugin_dir / "user_uploads"
    ]

    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
        core.logger.info(f"已创建目录: {directory}")

    # 创建默认配置文件(如果不存在)
    default_config = plugin_dir / "config.json"
    if not default_config.exists():
        default_settings = {
            "version": "1.0.0",
            "enabled": True,
            "cache_ttl": 3600
        }
        async with aiofiles.open(default_config, "w") as f:
            await f.write(json.dumps(default_settings, indent=2))
        core.logger.success(f"已创建默认配置文件: {default_config}")

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "list_exports", "列出导出文件")
async def list_exports(_ctx: AgentCtx) -> str:
    """列出所有导出的文件"""

    plugin_dir = plugin.get_plugin_path()
    exports_dir = plugin_dir / "exports"

    if not exports_dir.exists():
        return "导出目录不存在"

    # 列出目录中的文件
    files = [f.name for f in exports_dir.iterdir() if f.is_file()]

    if not files:
        return "暂无导出文件"

    return f"导出文件列表:\n" + "\n".join(f"- {f}" for f in files)

import hashlib

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "cache_resource", "缓存外部资源")
async def cache_external_resource(_ctx: AgentCtx, url: str) -> str:
    """下载并缓存外部资源"""

    # 动态导入 requests
    from nekro_agent.api.plugin import dynamic_import_pkg
    requests = dynamic_import_pkg("requests>=2.25.0")

    plugin_dir = plugin.get_plugin_path()
    cache_dir = plugin_dir / "cache"
    cache_dir.mkdir(parents=True, exist_ok=True)

    # 使用 URL 的哈希作为文件名
    url_hash = hashlib.md5(url.encode()).hexdigest()
    cache_file = cache_dir / f"{url_hash}.cache"

    # 检查缓存是否存在
    if cache_file.exists():
        core.logger.info(f"使用缓存文件: {cache_file}")
        async with aiofiles.open(cache_file, "rb") as f:
            cached_data = await f.read()
        return f"已从缓存加载,大小: {len(cached_data)} 字节"

    # 下载资源
    try:
        response = requests.get(url, timeout=30)
        response.raise_for_status()
        content = response.content

        # 保存到缓存
        async with aiofiles.open(cache_file, "wb") as f:
            await f.write(content)

        core.logger.success(f"资源已下载并缓存: {cache_file}")
        return f"资源已下载,大小: {len(content)} 字节"

    except Exception as e:
        core.logger.error(f"下载资源失败: {e}")
        return f"下载失败: {e}"

import time
import os

@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "cleanup_temp", "清理临时文件")
async def cleanup_temp_files(_ctx: AgentCtx, max_age_hours: int = 24) -> str:
    """清理超过指定时间的临时文件"""

    plugin_dir = plugin.get_plugin_path()
    temp_dir = plugin_dir / "temp"

    if not temp_dir.exists():
        return "临时目录不存在"

    now = time.time()
    max_age_seconds = max_age_hours * 3600
    deleted_count = 0

    # 遍历临时目录
    for file_path in temp_dir.iterdir():
        if file_path.is_file():
            # 检查文件修改时间
            file_age = now - file_path.stat().st_mtime

            if file_age > max_age_seconds:
                try:
                    os.remove(file_path)
                    deleted_count += 1
                    core.logger.info(f"已删除过期临时文件: {file_path.name}")
                except Exception as e:
                    core.logger.error(f"删除文件失败: {e}")

    return f"清理完成,删除了 {deleted_count} 个文件"

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "process_user_file", "处理用户上传的文件")
async def process_user_file(_ctx: AgentCtx, file_path: str) -> str:
    """处理用户上传的文件并保存到插件目录"""

    # 1. 获取 AI 传递的文件的真实路径
    host_path = _ctx.fs.get_file(file_path)

    # 2. 读取文件内容
    async with aiofiles.open(host_path, "rb") as f:
        file_content = await f.read()

    # 3. 保存到插件目录
    plugin_dir = plugin.get_plugin_path()
    uploads_dir = plugin_dir / "user_uploads"
    uploads_dir.mkdir(parents=True, exist_ok=True)

    # 使用时间戳作为唯一文件名
    saved_file = uploads_dir / f"{int(time.time())}_{host_path.name}"
    async with aiofiles.open(saved_file, "wb") as f:
        await f.write(file_content)

    core.logger.success(f"文件已保存到插件目录: {saved_file}")
    return f"文件已处理并保存,大小: {len(file_content)} 字节"

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "export_data", "导出数据文件")
async def export_data(_ctx: AgentCtx, data_content: str, filename: str) -> str:
    """导出数据文件并返回给 AI"""

    # 1. 保存到插件目录
    plugin_dir = plugin.get_plugin_path()
    exports_dir = plugin_dir / "exports"
    exports_dir.mkdir(parents=True, exist_ok=True)

    export_file = exports_dir / filename
    async with aiofiles.open(export_file, "w", encoding="utf-8") as f:
        await f.write(data_content)

    # 2. 转换为 AI 可访问的沙盒路径
    sandbox_path = await _ctx.fs.mixed_forward_file(export_file, file_name=filename)

    return f"数据已导出: {sandbox_path}"

from pydantic import BaseModel
from typing import Optional

class ModelInfo(BaseModel):
    """模型信息(存储在 KV)"""
    name: str
    version: str
    file_path: str  # 实际模型文件的路径(相对于插件目录)
    size_bytes: int
    created_at: float

@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "download_model", "下载模型")
async def download_model(_ctx: AgentCtx, model_url: str, model_name: str) -> str:
    """下载机器学习模型并保存元数据"""

    from nekro_agent.api.plugin import dynamic_import_pkg
    requests = dynamic_import_pkg("requests")

    # 1. 下载模型文件到插件目录
    plugin_dir = plugin.get_plugin_path()
    models_dir = plugin_dir / "models"
    models_dir.mkdir(parents=True, exist_ok=True)

    model_file = models_dir / f"{model_name}.model"

    try:
        response = requests.get(model_url, timeout=300)
        response.raise_for_status()
        model_data = response.content

        # 保存模型文件
        async with aiofiles.open(model_file, "wb") as f:
            await f.write(model_data)

        # 2. 保存模型元数据到 KV 存储
        model_info = ModelInfo(
            name=model_name,
            version="1.0.0",
            file_path=f"models/{model_name}.model",  # 相对路径
            size_bytes=len(model_data),
            created_at=time.time()
        )

        await plugin.store.set(
            store_key=f"model_info:{model_name}",
            value=model_info.model_dump_json()
        )

        return f"模型 '{model_name}' 下载成功,大小: {len(model_data)} 字节"

    except Exception as e:
        return f"下载失败: {e}"

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "load_model", "加载模型")
async def load_model(_ctx: AgentCtx, model_name: str) -> str:
    """加载已下载的模型"""

    # 1. 从 KV 存储获取模型元数据
    model_info_json = await plugin.store.get(store_key=f"model_info:{model_name}")

    if not model_info_json:
        return f"模型 '{model_name}' 不存在"

    model_info = ModelInfo.model_validate_json(model_info_json)

    # 2. 从插件目录加载模型文件
    plugin_dir = plugin.get_plugin_path()
    model_file = plugin_dir / model_info.file_path

    if not model_file.exists():
        return f"模型文件不存在: {model_file}"

    # 读取模型文件(示例)
    async with aiofiles.open(model_file, "rb") as f:
        model_data = await f.read()

    return f"模型已加载: {model_info.name} (版本 {model_info.version},大小 {model_info.size_bytes} 字节)"


# ---- from the document's best practices: the two hooks ----

@plugin.mount_on_channel_reset()
async def on_reset(_ctx: AgentCtx):
    """会话重置时清理数据"""
    await plugin.store.delete(
        chat_key=_ctx.from_chat_key,
        store_key="temp_cache"
    )

@plugin.mount_cleanup_method()
async def cleanup():
    """插件卸载时清理临时文件"""
    plugin_dir = plugin.get_plugin_path()
    temp_dir = plugin_dir / "temp"

    if temp_dir.exists():
        for file in temp_dir.iterdir():
            if file.is_file():
                os.remove(file)
