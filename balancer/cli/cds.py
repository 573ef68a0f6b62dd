"""`make setup`'s last step: dump the class-data archive short-lived Spark drivers map (balancer.jvm).

A local session runs the kinds of work the job does (SQL, Arrow hand-offs, a streaming query), so the
classes they load are in the archive; the JVM writes it when it exits, into a temporary name first so a
failed dump never leaves a half archive where drivers look for one.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from balancer.jvm import CDS_ARCHIVE, SHORT_LIVED_OPTIONS


def dump(archive: Path = CDS_ARCHIVE) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    quiet = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]  # classes it cannot archive are skipped, not errors
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        [*SHORT_LIVED_OPTIONS, f"-XX:ArchiveClassesAtExit={partial}", *quiet]
    )
    from balancer.spark.session import build_session

    # Two shuffle partitions, as the job's own configs set: the streaming aggregation runs the same kinds
    # of task as with Spark's 200, only fewer of them (opening and committing 200 state stores cost most
    # of the dump).
    spark = build_session(
        master="local[2]",
        app_name="cds-dump",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.range(0, 10_000).selectExpr("id % 7 AS k", "id AS v", "current_timestamp() AS ts")
    frame.groupBy("k").agg({"v": "sum"}).toPandas()
    spark.createDataFrame(frame.limit(100).toPandas()).groupBy("k").count().collect()
    with tempfile.TemporaryDirectory() as folder:
        frame.write.json(f"{folder}/in")
        query = (
            spark.readStream.schema(frame.schema)
            .json(f"{folder}/in")
            .withWatermark("ts", "1 second")
            .groupBy("k")
            .count()
            .writeStream.foreachBatch(lambda batch, _: batch.count())
            .outputMode("update")
            .option("checkpointLocation", f"{folder}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
    gateway = spark.sparkContext._gateway.proc  # the driver JVM, which writes the archive as it exits
    spark.stop()
    gateway.stdin.close()
    gateway.wait(timeout=300)
    if not partial.is_file():
        sys.exit(f"error: the JVM wrote no class-data archive at {partial}")
    partial.replace(archive)


if __name__ == "__main__":
    dump()
