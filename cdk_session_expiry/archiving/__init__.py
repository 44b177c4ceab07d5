"""The session archive: the archive bucket and its lifecycle (`archive`), the Firehose delivery
(`archive_delivery`) and the Athena named queries (`archive_query`). The construct and the
package's public names import it; it imports the top-level helpers and `monitoring`.
"""
