"""Replaying failed cleanups: the command (`replay`, `replay_cli`), where failures are read from
(`replay_sources`, `failure_records`, `removed_items`, `kinesis_replay`), what a replay may touch
(`replay_targets`, `replay_trust`, `replay_steps`, `replay_levers`) and what it reports
(`replay_outcomes`). It may import every package below it; nothing in the runtime imports it.
"""
