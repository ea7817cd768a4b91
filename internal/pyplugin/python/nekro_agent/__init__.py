"""nekro_agent: the plugin API of Nekro Agent, as nekro-go serves it.

Plugins written to the Nekro Agent plugin documents import from here
unchanged. Each plugin runs in a host-side Python process of its own
(nekro_agent._host); every store, file, message and log call goes to the
nekro process over a local socket (nekro_agent._link).
"""
