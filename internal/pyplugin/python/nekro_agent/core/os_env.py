"""The reference's OsEnv: paths and environment of its own install. nekro
keeps a plugin's files in its data directory (plugin.get_plugin_data_dir)."""
import os
import tempfile


class OsEnv:
    DATA_DIR = os.environ.get("TMPDIR") or tempfile.gettempdir()
    USER_UPLOAD_DIR = os.path.join(DATA_DIR, "uploads")
    SANDBOX_SHARED_HOST_DIR = os.path.join(DATA_DIR, "sandboxes")
    RUNNING_IN_DOCKER = False


__all__ = ["OsEnv"]
