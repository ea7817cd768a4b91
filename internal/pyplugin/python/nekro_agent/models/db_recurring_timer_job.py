"""DBRecurringTimerJob, the reference's model: the jobs of
nekro_agent.api.recurring_timer (timers of nekro's timer system). Use
that module to create, list and change them; direct queries fail
(NotAvailableError)."""
from nekro_agent.models._base import Model

__all__ = ["DBRecurringTimerJob"]


class DBRecurringTimerJob(Model):
    _why = "recurring jobs are read and changed through nekro_agent.api.recurring_timer"
