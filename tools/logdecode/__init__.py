"""Reading Kafka metadata log directories: the one decoder behind dump-log, pid-audit,
metadata-state and the Spark data source.

Nothing here imports Spark, so the command-line tools stay light and the Spark layer is a
thin wrapper over exactly the same rows.
"""
