"""The 获取插件目录 / プラグインディレクトリの取得 fragments of the plugin
documents (seed 000 and its Japanese page, seed 001), as they write them:
at the module's top level, run when the plugin is imported. In the
reference get_plugin_path() and get_plugin_data_dir() work there (they
create the directory and return it). A plugin of its own, so that the
other examples do not depend on it. Added around the fragments, only
`plugin` and its import.
"""
from nekro_agent.api.plugin import NekroPlugin

plugin = NekroPlugin(
    name="插件目录示例",
    module_name="plugindir_doc",
    description="plugin.get_plugin_path() at import time, as the documents show it",
    version="1.0.0",
    author="nekro_docs",
    url="",
)

# ---- from the document (seed 000) ----
from pathlib import Path
from nekro_agent.api import core

# 获取插件数据目录
plugin_dir: Path = plugin.get_plugin_path()
core.logger.info(f"插件数据目录: {plugin_dir}")

# 示例输出:data/plugins/my_author.my_plugin/

# ---- from the document (seed 001) ----
from pathlib import Path
from nekro_agent.api import core

# プラグインデータディレクトリを取得
plugin_dir: Path = plugin.get_plugin_data_dir()
core.logger.info(f"プラグインデータディレクトリ: {plugin_dir}")

# 出力例: data/plugins/my_author.my_plugin/
