"""Duties that must run once cluster-wide (lease reaper, retention, watchdogs)."""

from duetime.maintenance.reaper import LeaseReaper

__all__ = ["LeaseReaper"]
