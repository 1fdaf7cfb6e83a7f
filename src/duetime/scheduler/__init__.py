"""The scheduler: turns due occurrences of active jobs into runs."""

from duetime.scheduler.materializer import Materializer
from duetime.scheduler.planner import plan_job

__all__ = ["Materializer", "plan_job"]
