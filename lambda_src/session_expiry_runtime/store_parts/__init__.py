"""The parts of [`SessionStore`][session_expiry_runtime.store.SessionStore], one module a concern.

Import the store from `session_expiry_runtime.store`; these modules are its insides:

======================  =======================================================================
``errors``              the errors it raises
``session``             [`Session`][session_expiry_runtime.store.Session], what it returns
``keys``                keys and layout: item keys, attribute roles, item →
[`Session`][session_expiry_runtime.store.Session]
``core``                the table access every part shares: liveness conditions, conditional updates
``lifetime``            create, get, list, touch, end
``connections``         attach_connection (WebSocket connections)
``agent_sessions``      attach_agent_session (Amazon Bedrock AgentCore sessions)
``grants``              attach_grant, create_grant (KMS grants)
``connected_grants``    detach_connection; grants kept only while a client is connected
``claims``              ownership records, the writer side: claim, undo, release
======================  =======================================================================
"""
