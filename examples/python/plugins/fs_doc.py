"""The file examples of the plugin documents (seed 003, 文件交互: _ctx.fs),
as the document writes them. The page flattened the code; the line breaks
are restored. analyze_file and generate_report are the document's whole
methods; its other three fragments (a method's body each) are wrapped in
a method with the name and parameters the fragment uses, as the Go port
(examples/files2) names them. Added around them: imports and `plugin`.
"""
import json

from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(
    name="文件交互示例",
    module_name="fs_doc",
    description="_ctx.fs, as the documents show it",
    version="1.0.0",
    author="nekro_docs",
    url="",
)


# ---- from the document: whole methods ----

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "分析文件")
async def analyze_file(_ctx: AgentCtx, file_path: str) -> str:
    host_path = _ctx.fs.get_file(file_path)  # 沙盒路径 -> 宿主机路径
    if not host_path.exists():
        return "指定文件不存在"
    content = host_path.read_text(encoding="utf-8")
    # 处理 content...
    return f"文件共 {len(content)} 字符"


@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "生成报告")
async def generate_report(_ctx: AgentCtx, title: str, content: str) -> str:
    report = f"# {title}\n\n{content}"
    sandbox_path = await _ctx.fs.mixed_forward_file(
        report.encode(), file_name="report.md"
    )
    await _ctx.send_file(sandbox_path)
    return "报告已生成并发送"


# ---- from the document: fragments, each the body of a method ----

@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "获取远程图片")
async def fetch_image(_ctx: AgentCtx, url: str) -> str:
    """Download an image from a URL into the sandbox."""
    # 从远程 URL 获取图片,返回给 AI
    sandbox_path = await _ctx.fs.mixed_forward_file(
        url,
        file_name="image.png",
    )
    return sandbox_path  # "/app/shared/image.png"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "导出结果")
async def export_result(_ctx: AgentCtx, result: dict) -> str:
    """Save a result as JSON in the sandbox."""
    # 从字节数据生成文件
    data = json.dumps(result, ensure_ascii=False).encode()
    sandbox_path = await _ctx.fs.mixed_forward_file(data, file_name="result.json")
    return sandbox_path


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "写入报告")
async def write_report(_ctx: AgentCtx, text: str) -> str:
    """Write text to /app/shared/report.md without copying anything."""
    output = _ctx.fs.shared_path / "report.md"
    output.write_text(text)
    return _ctx.fs.forward_file(output)  # "/app/shared/report.md"
