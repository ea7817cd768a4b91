"""A file in a plugin directory that defines no plugin."""
x = 1
