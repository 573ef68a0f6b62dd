"""The JVM half of the stack, as `make setup` resolved it from jvm/pom.xml into jvm/lib/<set>/.

Spark gets its connectors as local jars (``spark.jars`` / ``--jars``), never through Ivy, so nothing
downloads at run time. Each set is loaded only when the config needs it: the Kafka connector for
``source.connector: native``, delta-spark for ``lakehouse.engine: delta-spark``, hadoop-aws and the AWS
SDK for delta-spark on ``s3://``/``s3a://``. A jar whose artifact pyspark already ships is left out, so
the JVM never sees two versions of one class.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from balancer.config import Config

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "jvm" / "lib"

_VERSION = re.compile(r"-\d[\w.\-]*\.jar$")


class JarSet(StrEnum):
    """A folder of jvm/lib: one Maven module of jvm/pom.xml and its runtime dependencies."""

    KAFKA = "kafka"  # Apache Kafka's broker and tools (a separate JVM, never Spark's classpath)
    SPARK_KAFKA = "spark-kafka"  # format("kafka")
    DELTA = "delta"  # format("delta")
    S3A = "s3a"  # s3a:// for Hadoop's file system (delta-spark on object storage)
    JMX_EXPORTER = "jmx-exporter"  # the Prometheus JMX exporter's java agent (a broker's -javaagent)


class MissingJarsError(RuntimeError):
    """jvm/lib lacks a set: the project's setup has not resolved it."""


def artifact(jar: Path) -> str:
    """``kafka-clients-3.9.1.jar`` -> ``kafka-clients``."""
    return _VERSION.sub("", jar.name)


def jars(jar_set: JarSet, *, lib: Path = LIB) -> list[Path]:
    """The set's jars; for Spark's sets, without the artifacts pyspark's own jars/ already has."""
    folder = lib / jar_set
    found = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not found:
        raise MissingJarsError(
            f"no jars in {folder} ({jar_set}): run `make setup`, which resolves jvm/pom.xml with Maven once"
        )
    if jar_set in (JarSet.KAFKA, JarSet.JMX_EXPORTER):  # never on Spark's classpath
        return found
    shipped = {artifact(jar) for jar in _pyspark_jars()}
    return [jar for jar in found if artifact(jar) not in shipped]


def classpath(jar_set: JarSet, *, lib: Path = LIB) -> str:
    """A java -cp value for the set."""
    return ":".join(str(jar) for jar in jars(jar_set, lib=lib))


def spark_sets(config: Config) -> list[JarSet]:
    """The jar sets a job with ``config`` needs on Spark's classpath."""
    sets = []
    if config.source.connector == "native":
        sets.append(JarSet.SPARK_KAFKA)
    if config.lakehouse.engine == "delta-spark":
        sets.append(JarSet.DELTA)
        if str(config.lakehouse.path).startswith(("s3://", "s3a://")):
            sets.append(JarSet.S3A)
    return sets


def spark_jars(sets: list[JarSet], *, lib: Path = LIB) -> list[str]:
    """Paths for ``spark.jars`` / ``--jars``, in set order."""
    return [str(jar) for jar_set in sets for jar in jars(jar_set, lib=lib)]


def _pyspark_jars() -> list[Path]:
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


# A Spark driver that lives seconds to minutes on two shared cores (the tests, the demos, `balancer sql`)
# spends more CPU compiling Spark with C2 and running parallel GC threads than it saves: C1 alone and the
# serial collector halve its CPU. The class-data archive `make setup` dumps (jvm/cds/spark.jsa) maps Spark's
# already-parsed classes instead of loading them again. A long-running job keeps the JVM's defaults.
# With C1 alone the JVM reserves only 48 MB for compiled code; Spark fills that within minutes, and a full
# code cache switches the compiler off for good (everything after runs interpreted), so the options reserve
# what tiered compilation would.
CDS_ARCHIVE = ROOT / "jvm" / "cds" / "spark.jsa"
SHORT_LIVED_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", "-XX:+UseSerialGC")


def short_lived_driver_options(*, archive: Path | None = None) -> str:
    """JVM options (for ``SPARK_SUBMIT_OPTS``) of a short-lived Spark driver: C1 only, the serial GC, and
    ``archive`` (default: jvm/cds/spark.jsa) when it exists. A JVM that cannot use the archive (another
    JDK, another classpath) starts without it, silently: the archive only saves time."""
    options = list(SHORT_LIVED_OPTIONS)
    archive = CDS_ARCHIVE if archive is None else archive
    if archive.is_file():
        options += [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    return " ".join(options)
