"""PlatformUser and PlatformChannel, the reference's platform schemas."""
from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["PlatformChannel", "PlatformUser"]


class PlatformUser(BaseModel):
    platform_name: str = Field(..., description="the platform's name")
    user_id: str = Field(..., description="the user's id on the platform")
    user_name: str = Field(..., description="the user's name")
    user_avatar: str = Field(default="", description="the user's avatar URL")


class PlatformChannel(BaseModel):
    channel_id: str = Field(..., description="the channel's id")
    channel_name: str = Field(..., description="the channel's name")
    channel_type: str = Field(default="unknown", description="group, private or unknown")
    channel_avatar: str = Field(default="", description="the channel's avatar URL")
