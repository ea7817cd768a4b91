"""A plugin that mounts a router on a system without FastAPI: it must fail
to load with an error naming the package."""
import sys

sys.modules["fastapi"] = None  # as if FastAPI were not installed: importing it raises ImportError

from nekro_agent.api.plugin import NekroPlugin  # noqa: E402

plugin = NekroPlugin(name="No FastAPI", module_name="nofastapi", description="mounts a router without FastAPI",
                     version="1.0.0", author="tester", url="https://example.org")


@plugin.mount_router()
def create_router():
    from fastapi import APIRouter

    return APIRouter()
