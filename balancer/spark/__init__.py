"""The streaming job on Spark, one package per stage, in the order the data flows:

``ingest`` (the metrics topic's records read and parsed) → ``land`` (appended to Delta as they arrive)
→ ``windows`` (closed event-time windows aggregated into loads) → ``contract`` (the data checked before
anything is planned on it) → ``plan`` (each cluster-window planned) → ``track`` (plans followed to their
outcome). ``lakehouse`` is the Delta storage every stage reads and writes; ``pipeline`` runs the stages
for each micro-batch, ``job`` starts the streaming query, ``session`` builds the SparkSession.
"""
