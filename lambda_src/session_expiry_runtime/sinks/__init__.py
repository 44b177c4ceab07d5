"""Where a cleaned session's record goes: the archive record and its delivery to Firehose
(`archive`, `archive_delivery`) and the EventBridge events (`events`). It imports `core` and
`owners`; the steps import it.
"""
