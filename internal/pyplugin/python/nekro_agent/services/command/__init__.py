"""The reference's command system, as plugins declare commands."""
