#!/usr/bin/env bash
# Submit the streaming balancer to Spark.
#   ./spark-submit.sh [--master URL] [SPARK OPTIONS] [--config FILE] [--set key=value ...] [--once] [--verbose]
# The config is validated before Spark starts. When it selects the cluster path
# (source.connector=native, lakehouse.engine=delta-spark) the Kafka/Delta/S3A jars that `make setup`
# resolved into jvm/lib are added with --jars (nothing downloads at run time); the library
# is shipped to executors with --py-files. Spark options passed
# through: --deploy-mode --conf --driver-java-options --archives --files --driver-memory --executor-memory
# --executor-cores --num-executors --total-executor-cores --queue --properties-file (README,
# "Running on a Spark cluster": a packed venv with --archives on YARN/Kubernetes).
# The console shows the job's own lines; Spark's logs and any trace go to the log file named at
# start (data/logs, or $BALANCER_LOG_DIR); --verbose shows them on the console instead.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
make --no-print-directory setup >/dev/null
py="$here/.venv/bin/python"
export PYSPARK_PYTHON="$py" PYSPARK_DRIVER_PYTHON="$py"

master="local[*]"
verbose=0
job_args=()
spark_args=()
java_options=""  # the caller's driver JVM options, kept after this script's log settings
while [ $# -gt 0 ]; do
  case "$1" in
    --master) master="$2"; shift 2 ;;
    --master=*) master="${1#--master=}"; shift ;;
    --driver-java-options) java_options="$java_options $2"; shift 2 ;;
    --conf)
      case "$2" in
        spark.driver.extraJavaOptions=*) java_options="$java_options ${2#*=}" ;;
        *) spark_args+=("$1" "$2") ;;
      esac
      shift 2 ;;
    --deploy-mode|--archives|--files|--driver-memory|--executor-memory|--executor-cores|--num-executors|\
    --total-executor-cores|--queue|--properties-file) spark_args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    --verbose) verbose=1; job_args+=("$1"); shift ;;
    *) job_args+=("$1"); shift ;;
  esac
done

jars="$("$py" -m balancer.cli.jars "${job_args[@]}")"
mkdir -p build
rm -f build/balancer.zip
# The library with the resources it reads at run time (table DDL, views, suites, default config);
# balancer/demo (the demo's and tests' machinery) is not part of a deployment.
"$py" - <<'PY'
import pathlib, zipfile
with zipfile.ZipFile("build/balancer.zip", "w", zipfile.ZIP_DEFLATED) as archive:
    for top in ("balancer", "lakehouse", "conf"):
        for path in sorted(pathlib.Path(top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.parts[:2] != ("balancer", "demo"):
                archive.write(path)
PY

# The driver runs the venv's python whatever spark.pyspark.python says for executors (a packed
# environment's ./env/bin/python exists only in their containers).
submit=("$here/.venv/bin/spark-submit" --master "$master" --py-files build/balancer.zip
        --conf spark.ui.showConsoleProgress=false --conf "spark.pyspark.driver.python=$py" ${spark_args[@]+"${spark_args[@]}"})
[ -n "$jars" ] && submit+=(--jars "$jars")
# Delta's SQL extension and catalog must be set before the session exists.
case "$jars" in
  *delta-spark*) submit+=(--conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension
                          --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog) ;;
esac
if [ "$verbose" = 0 ]; then
  # The JVM starts before Python: this script names the log file, for both (BALANCER_LOG_FILE), and
  # sends the JVM's stderr (its early lines) there. The Python driver's
  # output reaches the console through the JVM's stdout.
  logs="${BALANCER_LOG_DIR:-data/logs}"
  mkdir -p "$logs"
  export BALANCER_LOG_FILE
  BALANCER_LOG_FILE="$(cd "$logs" && pwd)/submit-$(date -u +%Y%m%dT%H%M%SZ)-$$.log"
  echo "logs (Spark, libraries, traces): ${BALANCER_LOG_FILE#"$here"/}; --verbose shows them here"
  java_options="-Dlog4j2.configurationFile=file:$here/conf/log4j2.properties \
-Dbalancer.log.file=$BALANCER_LOG_FILE$java_options"
  exec 2>>"$BALANCER_LOG_FILE"
fi
# One --driver-java-options: Spark lets it override spark.driver.extraJavaOptions, so the caller's options
# travel in it too (after ours: a -D given twice takes its last value).
[ -n "$java_options" ] && submit+=(--driver-java-options "${java_options# }")
exec "${submit[@]}" jobs/stream_balancer.py "${job_args[@]}"
