"""Trainer protocols (SandboxFusion, OpenRLHF) translated to episodes and back.

Each adapter only converts its protocol's request into `EpisodeCreate`s and the results
into its protocol's answer; `deadline.run_within` runs them through `service.episodes`.
"""
