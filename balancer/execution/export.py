"""A plan's batches as the files Kafka's own tools take, and a script that runs them in order.

Per batch (``batch-NNN-*``):

- **leadership**: ``kafka-leader-election.sh --election-type preferred --path-to-json-file
  batch-NNN-election.json``. A preferred election makes ``replicas[0]`` the leader, so where the
  intended leader is not first yet, ``batch-NNN-reassignment.json`` first reorders the replica
  list (same brokers, no data moves, no throttle), exactly as ``Plan.to_reassignment`` lists every
  partition whose replica list changes, order included, and ``Plan.to_election`` every partition
  whose leader changes.
- **replica_move**: ``kafka-reassign-partitions.sh --execute --reassignment-json-file
  batch-NNN-reassignment.json --throttle MIN``, then each participating broker's own computed
  rate, then ``--verify`` polled until every partition is done (``--verify`` also removes the
  throttles), then a preferred election for the partitions whose planned leader is a broker
  that already held a replica (Kafka keeps the current leader while it stays in the set).

Throttle, as a Kafka operator runs it: ``--throttle`` takes one rate and sets it on every broker
of the reassignment as both ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate``, and it is what marks the moving replicas as throttled
(the topic-level ``*.replication.throttled.replicas``). The computed rates are per broker and
each one is that broker's safety limit (its spare network capacity), so ``--throttle`` gets the
minimum over the batch's brokers (safe on every broker), and ``kafka-configs.sh --alter`` then
raises each participating broker to its own rate. ``--verify`` clears both when the batch is done.

Only :func:`export_plan` writes files; the rest is pure. One module, over 500 lines: the files and the
script that runs them must agree on every name and order, so they are written in one place.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from balancer.planner.actions import Action
from balancer.vocabulary import ActionKind

from .batches import Batch
from .throttle import BatchThrottle

DEFAULT_BOOTSTRAP = "${BOOTSTRAP_SERVERS}"
_KINDS = (ActionKind.LEADERSHIP, ActionKind.REPLICA_MOVE)


class ExportError(ValueError):
    """A plan_batches row that cannot be exported; the message names the batch and field."""


# ---- Kafka's JSON shapes -------------------------------------------------------------------


def batch_reassignment(batch: Batch) -> dict[str, Any] | None:
    """``kafka-reassign-partitions.sh`` JSON for ``batch``: every partition whose replica list
    changes (for a leadership batch: only a reorder putting the intended leader first); None
    when there is none."""
    parts = [
        {
            "topic": a.topic,
            "partition": a.partition,
            "replicas": list(a.new_replicas),
            "log_dirs": ["any"] * len(a.new_replicas),
        }
        for a in batch.actions
        if a.new_replicas != a.old_replicas
    ]
    return {"version": 1, "partitions": parts} if parts else None


def batch_election(batch: Batch) -> dict[str, Any] | None:
    """``kafka-leader-election.sh --election-type preferred`` JSON: partitions whose leader
    changes. For a replica batch, only those whose old leader stays in the replica set (Kafka
    keeps it as leader); where it leaves, the controller already elects the first live replica
    of the new list. None when there is none."""
    parts = [
        {"topic": a.topic, "partition": a.partition}
        for a in batch.actions
        if a.new_leader != a.old_leader
        and (batch.kind == ActionKind.LEADERSHIP or a.old_leader in a.new_replicas)
    ]
    return {"partitions": parts} if parts else None


def batch_rows(
    batches: Sequence[Batch], throttles: Sequence[BatchThrottle] | None = None, *, plan_id: str, cluster: str
) -> list[dict[str, Any]]:
    """``plan_batches`` rows for ``batches`` (``throttles``: one per batch, same order, e.g.
    ``plan_schedule(...).throttles``). ``throttle`` is ``{broker: bytes/s}`` (whole bytes, rounded
    down: the computed rate is a safety limit); JSON columns are strings, None when empty."""
    if throttles is not None and len(throttles) != len(batches):
        raise ValueError(
            f"throttles must have one entry per batch: {len(throttles)} for {len(batches)} batches"
        )
    rows = []
    for i, batch in enumerate(batches):
        t = throttles[i] if throttles is not None else None
        if t is not None and t.batch != batch.index:
            raise ValueError(f"throttles[{i}] is for batch {t.batch}, not {batch.index}")
        reassignment, election = batch_reassignment(batch), batch_election(batch)
        rows.append(
            {
                "plan_id": plan_id,
                "cluster": cluster,
                "batch": batch.index,
                "kind": batch.kind,
                "actions": len(batch.actions),
                "bytes_to_move": batch.bytes_to_move,
                "throttle": {int(b): int(r) for b, r in sorted(t.rate_by_broker.items())} if t else None,
                "estimated_seconds": t.estimated_seconds if t else None,
                "reassignment_json": json.dumps(reassignment) if reassignment else None,
                "election_json": json.dumps(election) if election else None,
            }
        )
    return rows


def check_reassignment(doc: Any, where: str) -> None:
    """Raise :class:`ExportError` unless ``doc`` is Kafka's reassignment JSON: ``version`` 1,
    ``partitions`` a list of {topic, partition, replicas (non-empty, unique ints), log_dirs
    (optional, one per replica)}."""
    if not isinstance(doc, Mapping) or doc.get("version") != 1 or not isinstance(doc.get("partitions"), list):
        raise ExportError(f'{where}: expected {{"version": 1, "partitions": [...]}}')
    seen = set()
    for i, p in enumerate(doc["partitions"]):
        at = f"{where}.partitions[{i}]"
        if not isinstance(p, Mapping) or not isinstance(p.get("topic"), str) or not p["topic"]:
            raise ExportError(f"{at}: needs a non-empty topic")
        part, reps = p.get("partition"), p.get("replicas")
        if isinstance(part, bool) or not isinstance(part, int) or part < 0:
            raise ExportError(f"{at}: partition must be an int >= 0, got {part!r}")
        if (
            not isinstance(reps, list)
            or not reps
            or len(set(reps)) != len(reps)
            or any(isinstance(b, bool) or not isinstance(b, int) for b in reps)
        ):
            raise ExportError(f"{at}: replicas must be a non-empty list of distinct broker ids, got {reps!r}")
        dirs = p.get("log_dirs")
        if dirs is not None and (
            not isinstance(dirs, list) or len(dirs) != len(reps) or not all(isinstance(d, str) for d in dirs)
        ):
            raise ExportError(f"{at}: log_dirs must be one string per replica, got {dirs!r}")
        if (p["topic"], part) in seen:
            raise ExportError(f"{at}: {p['topic']}-{part} listed twice")
        seen.add((p["topic"], part))


def check_election(doc: Any, where: str) -> None:
    """Raise :class:`ExportError` unless ``doc`` is ``kafka-leader-election.sh``'s JSON:
    ``partitions`` a list of {topic, partition}."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("partitions"), list):
        raise ExportError(f'{where}: expected {{"partitions": [...]}}')
    for i, p in enumerate(doc["partitions"]):
        part = p.get("partition") if isinstance(p, Mapping) else None
        if (
            not isinstance(p, Mapping)
            or not isinstance(p.get("topic"), str)
            or not p["topic"]
            or isinstance(part, bool)
            or not isinstance(part, int)
            or part < 0
        ):
            raise ExportError(f"{where}.partitions[{i}]: needs a topic and an int partition >= 0, got {p!r}")


def actions_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Action]:
    """``plan_actions`` rows (any order) as the plan's actions, in its order (``seq``)."""
    out = []
    for row in sorted(rows, key=lambda r: r["seq"]):
        try:
            out.append(
                Action(
                    kind=row["action"],
                    topic=row["topic"],
                    partition=row["partition"],
                    old_replicas=tuple(row["old_replicas"]),
                    new_replicas=tuple(row["new_replicas"]),
                    old_leader=row["old_leader"],
                    new_leader=row["new_leader"],
                    bytes_to_move=row["bytes_to_move"],
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ExportError(f"plan_actions seq {row.get('seq')!r}: {exc}") from None
    return out


# ---- reading plan_batches rows -------------------------------------------------------------


def _json_column(row: Mapping[str, Any], name: str, where: str) -> Any:
    value = row.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, (bytes, str)):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ExportError(f"{where}.{name} is not valid JSON: {exc}") from None
    return value


def _throttle(row: Mapping[str, Any], where: str) -> dict[int, int]:
    """``throttle`` as map<int,bigint> (a dict, or Arrow's list of (key, value) pairs) or a JSON object."""
    value = _json_column(row, "throttle", where)
    if value is None:
        return {}
    pairs = value.items() if isinstance(value, Mapping) else value
    try:
        out = {int(b): float(r) for b, r in pairs}
    except (TypeError, ValueError):
        raise ExportError(f"{where}.throttle must map broker id to bytes/s, got {value!r}") from None
    for b, r in out.items():
        if not math.isfinite(r) or r <= 0:
            raise ExportError(f"{where}.throttle for broker {b} must be > 0 bytes/s, got {r!r}")
    return {b: max(1, int(r)) for b, r in sorted(out.items())}


def _rows(batches_rows: Iterable[Mapping[str, Any]], fallback_throttle: int | None) -> list[dict[str, Any]]:
    rows = []
    for i, row in enumerate(batches_rows):
        if not isinstance(row, Mapping):
            raise ExportError(
                f"batches_rows[{i}] must be a mapping (a plan_batches row), got {type(row).__name__}"
            )
        index = row.get("batch")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ExportError(f"batches_rows[{i}].batch must be an int >= 0, got {index!r}")
        where = f"batch {index}"
        kind = row.get("kind")
        if kind not in _KINDS:
            raise ExportError(f"{where}.kind must be one of {_KINDS}, got {kind!r}")
        reassignment = _json_column(row, "reassignment_json", where)
        election = _json_column(row, "election_json", where)
        if reassignment is not None:
            check_reassignment(reassignment, f"{where}.reassignment_json")
            if not reassignment["partitions"]:
                reassignment = None
        if election is not None:
            check_election(election, f"{where}.election_json")
            if not election["partitions"]:
                election = None
        throttle = _throttle(row, where)
        if kind == ActionKind.REPLICA_MOVE and reassignment is None:
            raise ExportError(f"{where}: a replica_move batch needs its reassignment_json")
        if kind == ActionKind.REPLICA_MOVE and not throttle and fallback_throttle is None:
            raise ExportError(
                f"{where}: a replica_move batch needs its computed throttle, and the plan has none "
                f"({row.get('note') or 'not computed'}); replica moves are never run unthrottled: "
                "give one rate for such batches (balancer export --throttle BYTES_PER_SEC)"
            )
        if kind == ActionKind.LEADERSHIP and election is None and reassignment is None:
            raise ExportError(f"{where}: a leadership batch needs its election_json")
        seconds = row.get("estimated_seconds")
        note = row.get("note")
        rows.append(
            {
                "batch": index,
                "kind": kind,
                "reassignment": reassignment,
                "election": election,
                "throttle": throttle,
                "flat_throttle": None if throttle else fallback_throttle,
                "note": note if isinstance(note, str) and note else None,
                "plan_id": row.get("plan_id"),
                "cluster": row.get("cluster"),
                "actions": row.get("actions"),
                "bytes_to_move": row.get("bytes_to_move"),
                "estimated_seconds": float(seconds) if isinstance(seconds, (int, float)) else None,
            }
        )
    rows.sort(key=lambda r: r["batch"])
    indices = [r["batch"] for r in rows]
    if len(set(indices)) != len(indices):
        raise ExportError(
            f"batches_rows: batch listed twice: {sorted({b for b in indices if indices.count(b) > 1})}"
        )
    plans = {r["plan_id"] for r in rows}
    if len(plans) > 1:
        raise ExportError(f"batches_rows: rows of more than one plan: {sorted(map(str, plans))}")
    return rows


# ---- the script ------------------------------------------------------------------------------

_PROLOGUE = """#!/usr/bin/env bash
# Plan {plan_id} for cluster {cluster}: {count} batch(es), run in order; stops on the first failure.
# Usage: ./run.sh [BOOTSTRAP_SERVERS]     (or set BOOTSTRAP_SERVERS)
# Optional env: KAFKA_BIN (folder of Kafka's scripts; default: on PATH), COMMAND_CONFIG (admin client
# properties, e.g. security, passed as --command-config), VERIFY_INTERVAL (seconds between --verify
# polls, default 10), START_BATCH (resume from this batch index, default 0), SETTLE_SECONDS (how long
# a moved partition may still list a replica it is leaving before that counts as someone else's
# change, default 60).
set -euo pipefail
cd "$(dirname "$0")"

BOOTSTRAP_SERVERS="${{1:-${{BOOTSTRAP_SERVERS:-{default}}}}}"
if [ -z "$BOOTSTRAP_SERVERS" ]; then
  echo "usage: $0 BOOTSTRAP_SERVERS (or set BOOTSTRAP_SERVERS)" >&2
  exit 2
fi
KAFKA_BIN="${{KAFKA_BIN:-}}"
COMMAND_CONFIG="${{COMMAND_CONFIG:-}}"
VERIFY_INTERVAL="${{VERIFY_INTERVAL:-10}}"
SETTLE_SECONDS="${{SETTLE_SECONDS:-60}}"
START_BATCH="${{START_BATCH:-0}}"
extra=()
if [ -n "$COMMAND_CONFIG" ]; then extra=(--command-config "$COMMAND_CONFIG"); fi

kafka() {{  # kafka TOOL ARGS...: one of Kafka's scripts against the cluster
  local tool="$1"; shift
  "${{KAFKA_BIN:+$KAFKA_BIN/}}$tool" --bootstrap-server "$BOOTSTRAP_SERVERS" \\
    ${{extra[@]+"${{extra[@]}}"}} "$@"
}}

reassign() {{  # reassign BATCH FILE [THROTTLE]: start a reassignment, keep what it prints (the rollback JSON)
  local batch="$1" file="$2"; shift 2
  echo "batch $batch: kafka-reassign-partitions.sh --execute $file $*"
  kafka kafka-reassign-partitions.sh --execute --reassignment-json-file "$file" "$@" \\
    | tee "batch-$batch-execute.log"
}}

broker_throttle() {{  # broker_throttle BROKER RATE: this broker's own computed replication throttle, bytes/s
  kafka kafka-configs.sh --entity-type brokers --entity-name "$1" --alter \\
    --add-config "leader.replication.throttled.rate=$2,follower.replication.throttled.rate=$2"
}}

settling() {{  # settling VERIFY_OUTPUT: every "rather than" partition still holds all its target replicas
  # Kafka's --verify reports a finished reassignment whose old replica the controller has not yet
  # dropped (or whose new order has not yet reached the broker answering) as "replica set is 3,2,1
  # rather than 3,2". That passes; a target replica missing means someone else changed the partition.
  local line current replica pattern="replica set is ([0-9,]*) rather than ([0-9,]*)"
  while IFS= read -r line; do
    [[ "$line" =~ $pattern ]] || continue
    current=",${{BASH_REMATCH[1]}},"
    for replica in ${{BASH_REMATCH[2]//,/ }}; do
      [[ "$current" == *",$replica,"* ]] || return 1
    done
  done <<<"$1"
}}

wait_done() {{  # wait_done BATCH FILE ESTIMATED_SECONDS: poll --verify until no partition is in progress
  local batch="$1" file="$2" estimated="$3" out started=$SECONDS settle_started=""
  while true; do
    out="$(kafka kafka-reassign-partitions.sh --verify --reassignment-json-file "$file")"
    if grep -q "rather than" <<<"$out"; then
      settle_started="${{settle_started:-$SECONDS}}"
      if ! settling "$out" || (( SECONDS - settle_started > SETTLE_SECONDS )); then
        echo "$out" >&2
        echo "batch $batch: a partition is on another replica set than this plan says: stopping" >&2
        exit 1
      fi
      echo "batch $batch: moved; waiting for the old replicas to leave"
    elif ! grep -q "in progress" <<<"$out"; then
      echo "$out"
      echo "batch $batch: done in $((SECONDS - started)) s (estimated $estimated s)"
      return 0
    else
      settle_started=""
      echo "batch $batch: in progress after $((SECONDS - started)) s (estimated $estimated s)"
    fi
    sleep "$VERIFY_INTERVAL"
  done
}}

elect() {{  # elect BATCH FILE: preferred leader election (replicas[0] leads)
  echo "batch $1: kafka-leader-election.sh --election-type preferred $2"
  kafka kafka-leader-election.sh --election-type preferred --path-to-json-file "$2"
}}
"""


def _seconds(value: float | None) -> str:
    return "?" if value is None else str(math.ceil(value))


def _script(rows: list[dict[str, Any]], names: dict[int, dict[str, str]], default_bootstrap: str) -> str:
    first = rows[0] if rows else {}
    text = _PROLOGUE.format(
        plan_id=first.get("plan_id") or "?",
        cluster=first.get("cluster") or "?",
        count=len(rows),
        default=default_bootstrap,
    )
    for row in rows:
        b, files = row["batch"], names[row["batch"]]
        tag = f"{b:03d}"
        lines = [
            f"\n# ---- batch {b}: {row['kind']}, {row['actions'] if row['actions'] is not None else '?'} "
            f"action(s), {row['bytes_to_move'] or 0} bytes, estimated {_seconds(row['estimated_seconds'])} s",
            f'if [ "$START_BATCH" -le {b} ]; then',
        ]
        if row["note"]:
            lines.insert(1, "# note: " + " ".join(row["note"].split()))
        if "reassignment" in files:
            if row["kind"] == ActionKind.REPLICA_MOVE and not row["throttle"]:
                # No computed rates: the operator's one rate, on every broker of the reassignment.
                lines.append(f"  reassign {tag} {files['reassignment']} --throttle {row['flat_throttle']}")
            elif row["kind"] == ActionKind.REPLICA_MOVE:
                # One rate for --throttle: the lowest computed rate is within every broker's safe limit.
                lines.append(
                    f"  reassign {tag} {files['reassignment']} --throttle {min(row['throttle'].values())}"
                )
                for broker, rate in row["throttle"].items():
                    lines.append(f"  broker_throttle {broker} {rate}")
            else:
                lines.append(f"  reassign {tag} {files['reassignment']}   # reorder only: no data moves")
            lines.append(f"  wait_done {tag} {files['reassignment']} {_seconds(row['estimated_seconds'])}")
        if "election" in files:
            lines.append(f"  elect {tag} {files['election']}")
        lines.append("fi")
        text += "\n".join(lines) + "\n"
    text += '\necho "all batches done"\n'
    return text


_README = """Plan {plan_id} for cluster {cluster}: {count} batch(es), exported for Kafka's own tools.

Run all batches in order, stopping on the first failure:

    ./run.sh BOOTSTRAP_SERVERS          (or: BOOTSTRAP_SERVERS=host:9092 ./run.sh)

Env: KAFKA_BIN (folder of kafka-*.sh, default PATH), COMMAND_CONFIG (admin client properties for
security), VERIFY_INTERVAL (seconds between --verify polls), START_BATCH (resume at this batch),
SETTLE_SECONDS (how long a moved partition may still list a replica it is leaving, default 60).

Per batch NNN, run.sh does:
- batch-NNN-reassignment.json  kafka-reassign-partitions.sh --bootstrap-server {bootstrap} --execute
  --reassignment-json-file batch-NNN-reassignment.json [--throttle RATE]; what it prints (the current
  assignment, to roll back with) goes to batch-NNN-execute.log. Replica-move batches pass the lowest of
  the batch's computed per-broker rates to --throttle (safe on every broker), then raise each
  participating broker to its own rate with kafka-configs.sh (leader.replication.throttled.rate and
  follower.replication.throttled.rate). Then --verify is polled until no partition is in progress;
  --verify also removes the throttles. A partition --verify reports on a replica set other than the
  plan's stops the script, unless that set still holds every planned replica (Kafka has finished the
  move and not yet dropped the old replica): that is waited for, up to SETTLE_SECONDS. In a leadership
  batch the reassignment only reorders replicas (the intended leader first) and moves no data.
- batch-NNN-election.json      kafka-leader-election.sh --bootstrap-server {bootstrap} --election-type
  preferred --path-to-json-file batch-NNN-election.json: the first replica becomes leader.

Batches:
{batches}

If a batch stops (a failure, or a partition found on a replica set the plan does not say), the
reassignment already started keeps running in Kafka: check it with --verify, or roll back with
--cancel or with the JSON in batch-NNN-execute.log. Resume with START_BATCH=NNN ./run.sh.
"""


def export_plan(
    batches_rows: Iterable[Mapping[str, Any]],
    out_dir: str | Path,
    *,
    bootstrap_placeholder: str = DEFAULT_BOOTSTRAP,
    overwrite: bool = False,
    fallback_throttle: int | None = None,
) -> list[Path]:
    """Write ``batches_rows`` (``plan_batches`` rows of one plan, any order) into ``out_dir``:
    per batch ``batch-NNN-reassignment.json`` and/or ``batch-NNN-election.json``, then
    ``run.sh`` and ``README.txt``. Returns the paths written, in that order.

    ``bootstrap_placeholder``: what the README's commands show for the bootstrap servers; run.sh
    takes them from its first argument or ``$BOOTSTRAP_SERVERS``, and a placeholder other than
    the default becomes its fallback. Every row is checked (JSON shapes as Kafka's tools take
    them, a throttle for every replica batch) before anything is written: :class:`ExportError`
    names the batch and field. ``out_dir`` must be empty or new unless ``overwrite``.
    ``fallback_throttle`` (bytes/s): the one ``--throttle`` rate for replica batches whose row has
    no computed throttle (otherwise they are an error).
    """
    if not isinstance(bootstrap_placeholder, str) or not bootstrap_placeholder:
        raise ValueError(f"bootstrap_placeholder must be a non-empty string, got {bootstrap_placeholder!r}")
    if fallback_throttle is not None and (
        isinstance(fallback_throttle, bool)
        or not isinstance(fallback_throttle, int)
        or fallback_throttle <= 0
    ):
        raise ValueError(
            f"fallback_throttle must be a positive int (bytes/s) or None, got {fallback_throttle!r}"
        )
    rows = _rows(batches_rows, fallback_throttle)
    if not rows:
        raise ExportError("batches_rows: no batches to export")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"out_dir {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"out_dir {out} is not empty; choose a new folder (or overwrite)")
    # run.sh's fallback sits inside "${1:-${BOOTSTRAP_SERVERS:-...}}": backslash-escaped, not quoted.
    default = (
        ""
        if bootstrap_placeholder == DEFAULT_BOOTSTRAP
        else "".join("\\" + c if c in '"\\$`}' else c for c in bootstrap_placeholder)
    )

    documents: list[tuple[Path, str]] = []
    names: dict[int, dict[str, str]] = {}
    for row in rows:
        names[row["batch"]] = {}
        for key in ("reassignment", "election"):
            if row[key] is not None:
                name = f"batch-{row['batch']:03d}-{key}.json"
                names[row["batch"]][key] = name
                documents.append((out / name, json.dumps(row[key], indent=2) + "\n"))
    documents.append((out / "run.sh", _script(rows, names, default)))
    listing = "\n".join(
        f"  {r['batch']:>3}  {r['kind']:<12} {r['actions'] if r['actions'] is not None else '?':>5} "
        f"action(s)  {r['bytes_to_move'] or 0:>15} bytes  estimated {_seconds(r['estimated_seconds'])} s"
        + (
            f"  throttle {min(r['throttle'].values())}-{max(r['throttle'].values())} B/s"
            if r["throttle"]
            else ""
        )
        + (
            f"  throttle {r['flat_throttle']} B/s (given at export, not computed)"
            if r["flat_throttle"]
            else ""
        )
        + (f"\n       note: {r['note']}" if r["note"] else "")
        for r in rows
    )
    documents.append(
        (
            out / "README.txt",
            _README.format(
                plan_id=rows[0]["plan_id"] or "?",
                cluster=rows[0]["cluster"] or "?",
                count=len(rows),
                bootstrap=bootstrap_placeholder,
                batches=listing,
            ),
        )
    )

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path, text in documents:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)  # never leave a half-written file for an operator to run
        written.append(path)
    (out / "run.sh").chmod(0o755)
    return written
