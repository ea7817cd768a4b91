"""A second plugin with a router: the path tricks aimed at webapp must never reach it."""
import time

from fastapi import APIRouter

from nekro_agent.api.plugin import NekroPlugin

plugin = NekroPlugin(
    name="Web other",
    module_name="webother",
    description="Another plugin's routes",
    version="1.0.0",
    author="tester",
    url="https://example.org",
)


@plugin.mount_router()
def create_router() -> APIRouter:
    router = APIRouter()

    @router.get("/secret")
    async def secret():
        return {"secret": "other-secret"}

    @router.get("/block")
    async def block():
        time.sleep(60)  # blocks the process's event loop: nekro restarts the process

    return router
