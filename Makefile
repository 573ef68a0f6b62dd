# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The installer: uv resolves nothing here (requirements.lock pins every package), it only downloads and
# installs in parallel, about three times faster than pip on a cold cache.
UV := uv==0.13.9
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
# Every Python process (drivers, Spark's Python workers, the CLI, tests) imports pyspark, pandas, pyarrow and
# this package: from bytecode, not by compiling their sources again each time (several CPU-seconds per
# process). The venv is compiled when installed; this tree's own modules are cached by Python on first import,
# which an inherited PYTHONDONTWRITEBYTECODE would forbid.
unexport PYTHONDONTWRITEBYTECODE

BENCHES := planner planning source parse quality landing windows ingest formats cc_decode fleet lakehouse paths

.PHONY: setup run run-sim run-kafka lint test test-unit bench $(addprefix bench-,$(BENCHES)) bench-planner-scale clean cluster-up \
	cluster-down kafka-up kafka-down \
	notebook notebooks

JVM_STAMP := jvm/lib/.resolved
JVM_POMS := jvm/pom.xml $(wildcard jvm/*/pom.xml)

CDS := jvm/cds/spark.jsa

setup: $(STAMP) $(JVM_STAMP) $(CDS)

# The JVM half (jvm/pom.xml pins it): Kafka's broker and tools, Spark's Kafka connector, delta-spark,
# hadoop-aws. Resolved once into jvm/lib/; nothing downloads at run time (Spark gets --jars, not --packages).
$(JVM_STAMP): $(JVM_POMS)
	@command -v mvn >/dev/null || { echo "error: mvn not found (Maven resolves the JVM dependencies)"; exit 1; }
	rm -rf jvm/lib
	mvn --batch-mode --quiet -f jvm/pom.xml package
	@touch $(JVM_STAMP)

# The class-data archive short-lived Spark drivers map (balancer.jvm): dumped once per pyspark install.
$(CDS): $(STAMP) balancer/cli/cds.py
	@mkdir -p $(dir $(CDS))
	$(PY) -m balancer.cli.cds 2>$(dir $(CDS))dump.log || { tail -20 $(dir $(CDS))dump.log; exit 1; }

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 1; }
	@command -v java >/dev/null || { echo "error: java not found (Java 17 is required by Spark)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(UV)
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -r requirements.lock
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps -e .
	@touch $(STAMP)

# The end-to-end demo on real Apache Kafka brokers (README "make run"): four KRaft brokers, producers and a
# consumer group, `balancer agent` measuring the brokers' JMX exporters, the job, and `balancer execute`.
# The console shows the demo's own lines; `make run VERBOSE=1` shows Spark's and the libraries' logs too.
run: setup
	@$(PY) -m balancer.demo.real $(if $(VERBOSE),--verbose)

# The same job on a simulated cluster (embedded broker, a simulated minute a second): the whole lifecycle
# on eight brokers in about two minutes.
run-sim: setup
	@$(PY) -m balancer.demo $(if $(VERBOSE),--verbose)

# The old name of `make run`.
run-kafka: run

# Lint and format (ruff, pyproject.toml) over the tree, and the type checker (mypy) on the planner core, execution and
# config: the code a change is most likely to break silently.
LINT := $(VENV)/bin/ruff check --quiet . && $(VENV)/bin/ruff format --check --quiet . && $(VENV)/bin/mypy --no-error-summary
lint: setup
	@$(LINT) && echo "lint: ruff and mypy found nothing"

# Whole suite: three lanes at once, the lint in the third before its unit tests (on idle CPU, like them).
# The integration tests that run Spark (real Spark, real Kafka brokers, Delta on disk, real-time windows)
# run at normal priority in one process; the integration tests
# that start no Spark (marked `no_spark`: execution on the brokers, the agent's faults) run beside them in a
# second process with brokers of their own, mostly waiting on throttled copies, restarts and intervals, at
# nice 10: the Spark lane's micro-batches meet real-time window deadlines and must not wait on them. After
# them, in the same process, the tests that start Spark only in subprocesses and meet no real-time deadline
# (marked `beside`: `--once` submissions, console commands): their drivers then run at nice 10 too, on the
# CPU the Spark lane leaves, instead of lengthening it. The
# unit tests run under SCHED_IDLE (`chrt --idle`), so the kernel gives them only the CPU the others leave
# idle. The second lane first dumps the class-data archive `make setup` would (jvm/cds): the short-lived
# drivers its `beside` tests start are the ones that gain from it, and dumping it there keeps a minute of
# work off the start of the Spark lane, the longest. The second and third lanes print when all are done.
# Two lanes of Spark tests are not run: on two cores, two processes each with a Spark driver and brokers
# starve each other (micro-batches a minute long, real-time deadlines missed). TEST_WORKERS=2 splits all the modules over two processes instead
# (--dist loadfile: a module's fixtures start once) on bigger boxes.
# Exit code 5 means pytest collected nothing: a failure only when no lane collected anything.
TEST_WORKERS ?= 0
IDLE := $(shell command -v chrt >/dev/null && echo chrt --idle 0 || echo nice -n 19)
PYTEST := $(PY) -m pytest -q -ra
test: $(STAMP) $(JVM_STAMP)
ifeq ($(TEST_WORKERS),0)
	@mkdir -p build; \
	{ $(IDLE) sh -c '$(LINT)'; lrc=$$?; [ $$lrc -eq 0 ] && echo "lint: ruff and mypy found nothing"; \
	  $(IDLE) $(PYTEST) -m "not integration" --basetemp=build/pytest-unit $(PYTEST_ARGS); urc=$$?; \
	  [ $$lrc -eq 0 ] || { echo "error: lint failed (above)"; exit 1; }; exit $$urc; } >build/unit-tests.log 2>&1 & \
	unit=$$!; \
	{ nice -n 10 $(MAKE) --no-print-directory $(CDS) || exit 1; \
	  nice -n 10 $(PYTEST) -m "integration and (no_spark or beside)" --durations=10 --basetemp=build/pytest-kafka $(PYTEST_ARGS); } \
	  >build/kafka-tests.log 2>&1 & \
	kafka=$$!; trap 'kill $$unit $$kafka 2>/dev/null' EXIT; \
	$(PYTEST) -m "integration and not no_spark and not beside" --durations=20 $(PYTEST_ARGS); rc=$$?; \
	wait $$kafka; krc=$$?; wait $$unit; urc=$$?; trap - EXIT; \
	echo "---- integration tests without Spark (beside the others) ----"; cat build/kafka-tests.log; \
	echo "---- lint and unit tests (beside the integration tests, on idle CPU) ----"; cat build/unit-tests.log; \
	if [ $$rc -eq 5 ] && [ $$krc -eq 5 ] && [ $$urc -eq 5 ]; then echo "error: no tests were collected"; exit 1; fi; \
	for code in $$rc $$krc $$urc; do [ $$code -eq 0 ] || [ $$code -eq 5 ] || exit 1; done
else
	@$(MAKE) --no-print-directory $(CDS) && $(LINT)
	$(PYTEST) --durations=20 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "error: no tests were collected"; exit 1; fi; exit $$rc
endif

test-unit: setup
	$(PY) -m pytest -q -m "not integration" $(PYTEST_ARGS)

bench: $(addprefix bench-,$(BENCHES))

# bench-<name> runs benchmarks/<name>_bench.py; bench-ingest also runs paths_bench (the python connector +
# delta-rs beside Spark's native connector + delta-spark, on a real broker, in one run).
bench-ingest: bench-paths
$(addprefix bench-,$(BENCHES)): bench-%: setup
	$(PY) benchmarks/$*_bench.py

# The planner on the skewed 1.3M- and 2.8M-replica clusters, against their CPU, memory and balance
# budgets (exits non-zero if one is missed).
bench-planner-scale: setup
	$(PY) benchmarks/planner_bench.py --scale

# A Spark standalone master and two 1-core workers on loopback (prints the master URL for
# ./spark-submit.sh --master); state, work and logs under data/cluster.
cluster-up: setup
	$(PY) -m balancer.demo.cluster up --dir data/cluster $(CLUSTER_ARGS)

cluster-down:
	$(PY) -m balancer.demo.cluster down --dir data/cluster

# Three real Apache Kafka brokers (KRaft) on loopback from jvm/lib, with racks and a SASL/SCRAM listener;
# prints the bootstrap servers. State and logs under data/kafka.
kafka-up: setup
	@$(PY) -m balancer.demo.kafka_cluster up --dir data/kafka $(KAFKA_ARGS)

kafka-down:
	@$(PY) -m balancer.demo.kafka_cluster down --dir data/kafka

# JupyterLab on notebooks/, on loopback only, reading the lakehouse `make run` wrote: the notebooks read
# BALANCER_CONFIG (default conf/local.yaml) and BALANCER_LAKEHOUSE (see balancer/notebook.py). The token
# travels in the environment, not on a command line other users can read. JUPYTER_PATH puts the venv's
# kernel first, so a kernel spec of the user's own cannot run the notebooks on another Python.
NOTEBOOK_PORT ?= 8888
NOTEBOOK_ENV := JUPYTER_PATH=$(abspath $(VENV))/share/jupyter
notebook: setup
	@$(PY) -m balancer.notebook || echo "(the notebooks will fail until then)"
	@token=$$($(PY) -c 'import secrets; print(secrets.token_hex(24))'); \
	  echo "JupyterLab: http://127.0.0.1:$(NOTEBOOK_PORT)/lab?token=$$token  (Ctrl-C stops it)"; \
	  $(NOTEBOOK_ENV) JUPYTER_TOKEN=$$token exec $(VENV)/bin/jupyter lab --no-browser --ServerApp.ip=127.0.0.1 \
	    --ServerApp.port=$(NOTEBOOK_PORT) --ServerApp.port_retries=0 --ServerApp.root_dir=notebooks \
	    --log-level=WARN --LabApp.log_level=WARN $(if $(filter 0,$(shell id -u)),--allow-root)

# Re-executes every notebook in place on that lakehouse, saving its outputs and charts (as PNG images).
notebooks: setup
	@$(PY) -m balancer.notebook
	$(NOTEBOOK_ENV) $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace --log-level=WARN \
	  --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.record_timing=False notebooks/*.ipynb

clean:
	-@$(PY) -m balancer.demo.kafka_cluster down --dir data/kafka 2>/dev/null
	rm -rf data .pytest_cache
