"""The operator's levers: the kill switch's alarms (`kill_switch`), the AppConfig feature flags
(`feature_flags`), the circuit breaker (`circuit_breaker`), the pause watch (`pause_watch`) and
the table of deferred work (`deferred_work`). The construct imports it; it imports the top-level
helpers and `monitoring`.
"""
