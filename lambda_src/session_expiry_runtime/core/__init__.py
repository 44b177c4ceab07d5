"""The runtime's foundation: the settings read from the environment (`config`), key prefixes
(`prefixes`), time to live and timestamps (`ttl`, `ttl_log`, `timestamps`), the decoded item
(`decode`), metrics (`metrics`), the AWS clients and their listing model (`clients`,
`listing_model`), the invocation's clock and pacing (`invocation`, `pacing`, `gc_settings`),
Regions (`regions`), AgentCore session names (`agent_sessions`), grant names (`grant_names`), the
steps' thread pool (`step_pool`), the ownership records' format and kinds (`ownership`), the
resource kinds, each declared once (`kinds`, `kind_settings`), and the request budget every
invocation shares (`shared_pace`), and the name a command line tool gives itself
(`commands`). Every other package may import it; it imports nothing of the
runtime outside itself.
"""
