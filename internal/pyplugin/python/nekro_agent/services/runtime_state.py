"""Whether nekro is shutting down (the plugin's process ends with it)."""


def is_shutting_down() -> bool:
    return False


__all__ = ["is_shutting_down"]
