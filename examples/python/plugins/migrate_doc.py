"""Seed 000's 版本兼容性 example (数据存储), as the document writes it: an
init hook that migrates the plugin's KV data to version 2.0.0. It is a
plugin of its own because a plugin holds one init method (a second
mount_init_method replaces the first, as in the reference): in
datadir_doc.py it would replace init_plugin_resources. Added around it,
only what the document implies: the imports it uses and `plugin`.
"""
from nekro_agent.api import core
from nekro_agent.api.plugin import NekroPlugin

plugin = NekroPlugin(
    name="数据迁移示例",
    module_name="migrate_doc",
    description="An init hook migrating KV data, as the documents show it",
    version="2.0.0",
    author="nekro_docs",
    url="",
)

# ---- from the document ----
@plugin.mount_init_method()
async def migrate_data():
    """数据迁移示例"""

    # 检查版本
    version = await plugin.store.get(store_key="data_version")

    if version is None or version < "2.0.0":
        # 执行数据迁移
        core.logger.info("检测到旧版本数据,开始迁移...")

        # 迁移逻辑...

        # 更新版本号
        await plugin.store.set(store_key="data_version", value="2.0.0")
        core.logger.success("数据迁移完成")
