"""The reference's memory services, answered from nekro's long-term memory
(nekro serve --memory, docs/knowledge.md) for the call's chat."""
