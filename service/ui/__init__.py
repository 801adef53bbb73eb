"""The operators' web page: Jinja2 templates, the SVG charts drawn on the server, and a
small committed script and stylesheet (no build step, no CDN)."""
