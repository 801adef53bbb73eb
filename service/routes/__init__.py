"""HTTP only, one resource per module: parse, call the service layer, map to a response.

A route never imports another route; the logic is in `service.episodes`,
`service.interactive`, `service.adapters`, `service.readiness` and `service.metrics`."""
