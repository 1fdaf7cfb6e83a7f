"""The Django app of duetime: at start-up, every installed app's ``duetime_tasks`` module is
imported (its :func:`~duetime.contrib.django.task` functions registered)."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

TASKS_MODULE = "duetime_tasks"


class DuetimeConfig(AppConfig):
    name = "duetime.contrib.django"
    label = "duetime"
    verbose_name = "duetime"

    def ready(self) -> None:
        autodiscover_modules(TASKS_MODULE)
