"""The fit check over the portal's inventory: the edge between the database and the pure fit
core (`pools.core.fit`).

- `cluster`: the inventory's rows turned into the core's `ClusterSnapshot` (a read, a constant
  number of queries whatever the number of nodes and pods);
- `service`: "will this manifest or this Pending pod land, and where?" — the one function
  the fit page and `POST /api/v1/fit/` call;
- `pending`: the GPU pods waiting now, and why; the pods on a pool's nodes that do not
  belong there (intruders).

What a move does to the pods on its nodes is the moves' own (`pools.moves.impact`), read
over this cluster.
"""
