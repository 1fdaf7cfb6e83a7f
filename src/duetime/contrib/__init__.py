"""Integrations with web frameworks, a layer above the app (beside the CLI): FastAPI
(:mod:`duetime.contrib.fastapi`) and Django (:mod:`duetime.contrib.django`). Each acts only
through :class:`~duetime.AsyncApp` / :class:`~duetime.App`; docs/integrations.md."""
