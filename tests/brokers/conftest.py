from tests.brokers.brokerkit import broker

__all__ = ["broker"]
