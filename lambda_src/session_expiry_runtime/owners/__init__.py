"""Who owns what, checked: the ownership check and its batched reads (`claims`), what a step did to
a resource (`outcomes`) and the releases a cleanup defers (`deferred_releases`); the records'
format is `core.ownership`. It imports only `core`; every package above it may import it.
"""
