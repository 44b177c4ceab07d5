"""The operator's commands: the kill switch (`kill_switch`) and the status report (`status`), run as
`python -m session_expiry_runtime.kill_switch` and `python -m session_expiry_runtime.status`.
It imports `switches` and below; nothing in the runtime imports it.
"""
