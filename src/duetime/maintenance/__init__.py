"""Duties that must run once cluster-wide (lease reaper, retention, watchdogs)."""

from duetime.maintenance.manager import MaintenanceManager
from duetime.maintenance.reaper import LeaseReaper
from duetime.maintenance.retention import RetentionPruner

__all__ = ["LeaseReaper", "MaintenanceManager", "RetentionPruner"]
