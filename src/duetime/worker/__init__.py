"""The worker: claims due runs, fires them at their instant, heartbeats, completes fenced."""

from duetime.worker.worker import Worker

__all__ = ["Worker"]
