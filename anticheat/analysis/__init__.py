"""Stage 1a of screening: what an action does, parsed (bash, Python, decoded payloads) into
`Facts` the rules match on. Entry point: `anticheat.analysis.facts.analyze`."""
