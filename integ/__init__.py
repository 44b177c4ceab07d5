"""Deployed integration test of SessionExpiry (``make integ``); see ``integ/README.md``."""
