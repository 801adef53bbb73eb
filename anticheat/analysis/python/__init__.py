"""Python, read through `ast` (`analyzer`) into `PyFacts` (`facts`)."""
