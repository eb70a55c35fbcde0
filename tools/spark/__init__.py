"""The Spark layer: a `kraft-metadata` data source and the pipeline jobs, a thin wrapper over
`kraftpy.tools.logdecode` (which never imports Spark). Needs the `kraftpy[spark]` extra and
Java 17 or 21."""
