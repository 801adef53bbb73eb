"""What the API (`service/`) and the workers (`workers/`) share, with neither FastAPI nor
Docker: settings and their defaults, the Redis store and its key schema, the queue and job
names, the host limits. Both sides import this package; it imports neither of them."""
