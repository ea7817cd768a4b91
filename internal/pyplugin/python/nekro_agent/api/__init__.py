"""The API plugins import: core, message, plugin, schemas."""
