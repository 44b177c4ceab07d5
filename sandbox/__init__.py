"""``make sandbox``: deploy the sample app into a local AWS emulator and watch sessions get cleaned.

Run ``python -m sandbox --help``. See ``sandbox.scenario``.
"""
