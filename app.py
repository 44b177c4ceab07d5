#!/usr/bin/env python3
"""CDK entry point of the sample app (``cdk synth``); see ``sample_app/app.py`` for context."""

from sample_app.app import build_app

build_app().synth()
