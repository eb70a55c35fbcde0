"""The broker simulator for tests: it lives in `kraftpy.tools.broker_sim` (users run it too)."""

from kraftpy.tools.broker_sim import NOT_CONTROLLER, STALE_BROKER_EPOCH, BrokerError, BrokerSim

__all__ = ["NOT_CONTROLLER", "STALE_BROKER_EPOCH", "BrokerError", "BrokerSim"]
