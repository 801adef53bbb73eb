"""Git as the vcs rules need it: the oracle that tells the base commit's past from its future."""
