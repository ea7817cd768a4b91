"""DBRecurringTimerJob, the reference's model: importable; queries fail (NotAvailableError)
because recurring timers are kept by nekro's timer plugin (nekro.timer)."""
from nekro_agent.models._base import Model

__all__ = ["DBRecurringTimerJob"]


class DBRecurringTimerJob(Model):
    _why = "recurring timers are kept by nekro's timer plugin (nekro.timer)"
