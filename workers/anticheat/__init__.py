"""Anti-cheat: parsing, rules, fake-data responders, the honeypot and the LLM judge."""
