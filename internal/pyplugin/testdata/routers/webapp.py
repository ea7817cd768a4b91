"""A Python plugin with a web router written to the reference's API
(mount_router returning a FastAPI APIRouter), for nekro's router tests."""
import asyncio
import hashlib
import os

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse

from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

VERSION = "v1"

plugin = NekroPlugin(
    name="Web app",
    module_name="webapp",
    description="Routes served by a Python plugin",
    version="1.0.0",
    author="tester",
    url="https://example.org",
)

# The stream the test holds open waits for /release.
released = asyncio.Event()


@plugin.mount_router()
def create_router() -> APIRouter:
    router = APIRouter()

    @router.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse("<h1>webapp " + VERSION + "</h1>")

    @router.get("/version")
    async def version():
        return {"version": VERSION}

    @router.get("/echo")
    async def echo_get(request: Request, q: str = ""):
        return {"method": request.method, "path": request.url.path, "q": q,
                "x_test": request.headers.get("x-test", ""), "auth": request.headers.get("authorization", "")}

    @router.post("/echo")
    async def echo_post(request: Request):
        body = await request.body()
        return {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}

    @router.get("/big")
    async def big(n: int = 3 << 20):
        return Response(b"x" * n, media_type="application/octet-stream",
                        headers={"X-Sum": hashlib.sha256(b"x" * n).hexdigest()})

    @router.get("/file")
    async def file():
        path = plugin.get_plugin_data_dir() / "page.txt"
        path.write_bytes(b"file " * 40000)
        return FileResponse(path, media_type="text/plain")

    @router.get("/cookies")
    async def cookies():
        r = JSONResponse({"ok": True})
        r.set_cookie("a", "1")
        r.set_cookie("b", "2")
        return r

    @router.get("/events")
    async def events():
        async def gen():
            yield "data: first\n\n"
            await released.wait()
            yield "data: second\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    @router.post("/release")
    async def release():
        released.set()
        return {"released": True}

    @router.get("/slow")
    async def slow(ms: int = 100):
        await asyncio.sleep(ms / 1000)
        return {"slept": ms}

    @router.get("/hang")
    async def hang():
        await asyncio.sleep(3600)

    @router.get("/boom")
    async def boom():
        raise RuntimeError("route-secret-detail")

    @router.get("/missing")
    async def missing():
        raise HTTPException(status_code=404, detail="no such thing")

    @router.get("/die")
    async def die():
        os._exit(3)

    @router.get("/stream-die")
    async def stream_die():
        async def gen():
            yield "data: before\n\n"
            await asyncio.sleep(0.5)
            os._exit(4)
            yield "data: never\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    @router.get("/store")
    async def store(v: str = ""):
        if v:
            await plugin.store.set(store_key="web", value=v)
        return {"value": await plugin.store.get(store_key="web")}

    return router


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "webapp_version")
async def webapp_version(_ctx: AgentCtx) -> str:
    """Which version of the web app answers."""
    return VERSION
