"""Dynamic Resource Allocation: the devices drivers publish, the claims pods make, and how the
scheduler allocates one from the other (pure)."""
