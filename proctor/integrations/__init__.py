"""Adapters that plug Proctor into trainers (verl, OpenRLHF, TRL) and agent loops."""
