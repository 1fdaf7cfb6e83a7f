"""Broker targets (docs/brokers.md, decision 0026): Redis streams, RabbitMQ exchanges and NATS
JetStream subjects, reached through the transactional outbox. ``config`` names the worker's
connections, ``validate`` checks a job's target, ``message`` builds a run's message, and
``publish`` opens the per-broker publishers the relay (``worker/relay.py``) uses. The broker
clients (``redis``, ``aio-pika``, ``nats-py``; extras ``duetime[redis]`` …) are imported only
when a publisher first connects."""
