"""Leader election (one row with an expiry and a term) and node presence."""

from duetime.leadership.elector import Elector
from duetime.leadership.presence import NodePresence, new_node_id

__all__ = ["Elector", "NodePresence", "new_node_id"]
