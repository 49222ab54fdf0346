"""Generation: requests as upstream sends them (``request``), engines (``backends``), the per-slice response
store (``store``) and the resumable slice runner (``run``)."""
