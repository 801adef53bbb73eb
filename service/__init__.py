"""The HTTP API: validates, authenticates, stores and queues episodes; never touches Docker."""
