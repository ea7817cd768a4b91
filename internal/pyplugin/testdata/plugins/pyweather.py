"""A Python plugin with settings, declared as the reference's plugins do."""
from typing import List, Literal

from pydantic import Field

from nekro_agent.api.plugin import ConfigBase, ExtraField, NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(
    name="Python weather",
    module_name="pyweather",
    description="Settings of a Python plugin",
    version="1.0.0",
    author="tester",
    url="https://example.org",
)


@plugin.mount_config()
class WeatherConfig(ConfigBase):
    API_KEY: str = Field(default="", title="API key", description="the weather service's key",
                         json_schema_extra=ExtraField(is_secret=True).model_dump())
    TIMEOUT: int = Field(default=10, title="Timeout", ge=1, le=60)
    UNITS: Literal["metric", "imperial"] = Field(default="metric", title="Units")
    CITIES: List[str] = Field(default=["Paris"], title="Cities")


config: WeatherConfig = plugin.get_config(WeatherConfig)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "weather settings")
async def weather_settings(_ctx: AgentCtx) -> str:
    """The settings in force, as the plugin sees them."""
    return "%s %d %s %s" % ("key-set" if config.API_KEY else "no-key", config.TIMEOUT, config.UNITS, ",".join(config.CITIES))


@plugin.on_enabled()
async def enabled():
    await plugin.store.set(store_key="switched", value="on")


@plugin.on_disabled()
async def disabled():
    await plugin.store.set(store_key="switched", value="off")
