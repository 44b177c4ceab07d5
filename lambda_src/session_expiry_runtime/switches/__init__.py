"""The operator's levers read at run time: the feature flags (`feature_flags`), the work they defer
(`deferred`), the circuit breaker (`circuit_breaker`), the pause watch (`pause_watch`) and the
kill switch's flag commands (`kill_switch_flags`). It imports `core` and `owners`; the cleanup,
recovery, ops and handler import it.
"""
