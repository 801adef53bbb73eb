"""Bash, read by one tree-sitter walker (`parser`) into the data model of `syntax`."""
