"""Which pool each node was in, and when: the stays the inventory records as it sees nodes
change pool, come and go (stays), read back for any window (the figures over time)."""
