"""The cleanup pipeline: one batch of removals and its time guard (`batch`), the runner that checks
ownership and runs the steps (`runner`), the entry used by the handler and the replay (`cleaner`)
and the feature flags applied to one invocation (`levers`). It imports every package below it
(`core`, `owners`, `records`, `sinks`, `steps`, `switches`); only `recovery` and the handler
import it.
"""
