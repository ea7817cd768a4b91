"""The reference's adapters, as plugins reach them: the adapter of a
chat (adapters.utils.adapter_utils), OneBot v11's get_bot. nekro's
platform adapters run in nekro, not in the plugin's process; what they do
not expose to plugins raises NotAvailableError naming it."""
