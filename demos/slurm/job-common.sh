# Shared by the job scripts in demos/slurm/ (sourced, not run): where things are, and the
# cleanup every job needs. Read this once; the scripts only say what differs.
#
# What a job gets from lab_job_start:
#   CHECKOUT       the lab's checkout ($SLURM_SUBMIT_DIR: submit from the checkout's root,
#                  since Slurm runs a copy of the script from its spool directory)
#   PY             $CHECKOUT/.venv/bin/python when present (`make lab` creates it), else
#                  python3 from PATH: uncomment a `module load` in the job script for that
#   WORKSPACE      the lab's workspace, $IOLAB_WORKDIR or $CHECKOUT/workspace (shared
#                  storage on a cluster, visible from the login node)
#   RESULTS        $WORKSPACE/slurm-results/$SLURM_JOB_ID: where results are copied back;
#                  its file `status` says COMPLETED or FAILED <exit> when the job ends
#   JOB_LOCAL      a fresh per-job directory on the node-local disk; removed when the job
#                  ends, also on failure, scancel or the time limit
#   LOCAL_RESULTS  $JOB_LOCAL/results: write results here; copied to RESULTS at the end
#   NODES          the job's nodes, one name per element (scontrol show hostnames), and
#   NNODES         their number; job.json in the results names them, with the job's tasks
#                  and the number of machines under them (distinct kernel boot ids)
#
# On several nodes (sbatch --nodes=N): JOB_LOCAL is made on the first node only. A script
# that wants it on every node calls `local_dir_on_every_node` (one srun task per node makes
# the same path there, and the end of the job removes it there again); `on_each_node CMD`
# runs CMD once per node.
#
# The node-local disk is the first of these that is a writable directory: IOLAB_NODE_LOCAL
# (set it to override), SLURM_TMPDIR (a per-job directory at the Alliance/Compute Canada and
# Mila), LOCAL_SCRATCH (e.g. CSC Puhti/Mahti with --gres=nvme:N), TMPDIR (per-job on sites
# using job_container/tmpfs or a prolog; else Slurm sets it to /tmp), then /tmp. Check your
# site's documentation: on some clusters /tmp is small or shared memory.
#
# Signals: the scripts ask for `#SBATCH --signal=B:TERM@60`, so Slurm sends SIGTERM to this
# shell a minute before the time limit. Long steps run in the background (run_step) so the
# shell can react at once: the trap stops the step, copies back what exists and cleans up.

lab_die() {
    echo "error: $*" >&2
    exit 2
}

lab_node_local_base() {
    local name
    for name in IOLAB_NODE_LOCAL SLURM_TMPDIR LOCAL_SCRATCH TMPDIR; do
        if [[ -n "${!name:-}" && -d "${!name}" && -w "${!name}" ]]; then
            echo "${!name} (from \$$name)"
            return
        fi
    done
    echo "/tmp (no IOLAB_NODE_LOCAL, SLURM_TMPDIR, LOCAL_SCRATCH or TMPDIR set)"
}

lab_job_start() {
    local name=$1 base
    [[ -n "${SLURM_JOB_ID:-}" ]] || lab_die "this is a Slurm job script: submit it with" \
        "\`sbatch demos/slurm/$name.sbatch\` from the lab's checkout (SLURM_JOB_ID is not set)"
    if [[ -x "$CHECKOUT/.venv/bin/python" ]]; then
        PY=$CHECKOUT/.venv/bin/python
    else
        PY=$(command -v python3) || lab_die "no Python: run \`make lab\` in $CHECKOUT on the" \
            "login node, or load one in the job script (module load python)"
    fi
    "$PY" -c "import pandas" 2>/dev/null || lab_die "$PY lacks pandas: run \`make lab\` in" \
        "$CHECKOUT (it creates .venv) or load a Python module that has it"
    export IOLAB_WORKDIR=${IOLAB_WORKDIR:-$CHECKOUT/workspace}
    WORKSPACE=$IOLAB_WORKDIR
    # Made and marked as the lab makes every workspace entry, so `make clean` removes it.
    "$PY" -c 'import sys
from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.workspace import WorkspaceEntry
try:
    ensure_writable_dir(WorkspaceEntry.SLURM_RESULTS.path())
except LabError as err:
    sys.exit(f"error: {err}")' || lab_die "cannot create the workspace $WORKSPACE; set IOLAB_WORKDIR"
    RESULTS=$WORKSPACE/slurm-results/$SLURM_JOB_ID
    base=$(lab_node_local_base)
    JOB_LOCAL=$(mktemp -d "${base%% (*}/iolab-$name-$SLURM_JOB_ID-XXXXXX") ||
        lab_die "cannot create a directory on the node-local disk ${base%% (*}; set" \
            "IOLAB_NODE_LOCAL to a writable node-local directory"
    LOCAL_RESULTS=$JOB_LOCAL/results
    mkdir "$LOCAL_RESULTS"
    NNODES=${SLURM_JOB_NUM_NODES:-1}
    if [[ -n "${SLURM_JOB_NODELIST:-}" ]] && command -v scontrol >/dev/null; then
        mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
    else
        NODES=("${SLURMD_NODENAME:-$(hostname -s)}")
    fi
    # Machines: nodes that print the same kernel boot id share one machine (several slurmd
    # on one host, as in the lab's tests): their rates add up to nothing a cluster has.
    local machines=1
    if [[ $NNODES -gt 1 ]]; then
        machines=$(timeout 60 srun --nodes="$NNODES" --ntasks="$NNODES" --ntasks-per-node=1 \
            cat /proc/sys/kernel/random/boot_id | sort -u | wc -l) || machines=0
    fi
    "$PY" -c 'import json, sys
name, job, cluster, tasks, machines, *nodes = sys.argv[1:]
print(json.dumps({"script": name, "job_id": job, "cluster": cluster, "tasks": int(tasks),
                  "nodes": nodes, "machines": int(machines) or None}))' "$name" \
        "$SLURM_JOB_ID" "${SLURM_CLUSTER_NAME:-?}" "${SLURM_NTASKS:-1}" "$machines" \
        "${NODES[@]}" >"$LOCAL_RESULTS/job.json"
    LAB_STEP_PID=
    LAB_JOB_DONE=
    LAB_EXTRA_CLEANUP=()
    LAB_LOCAL_EVERYWHERE=
    exec {LAB_OUT}>&1 {LAB_ERR}>&2  # the job's own output, for the trap (see lab_job_end)
    trap lab_job_end EXIT
    trap lab_job_terminated TERM
    cd "$CHECKOUT"
    echo "job $SLURM_JOB_ID on ${SLURMD_NODENAME:-?} (nodes: ${NODES[*]}): checkout $CHECKOUT, python $PY"
    echo "node-local directory: $JOB_LOCAL, node-local base $base"
}

lab_job_terminated() {
    echo "job $SLURM_JOB_ID: SIGTERM (time limit or scancel): stopping" >&"$LAB_ERR"
    exit 143
}

# run_step CMD...: run one long step in the background and wait, so a SIGTERM is handled now.
# Returns the step's exit status (under `set -e` a failed step ends the job).
run_step() {
    local status=0
    "$@" {LAB_OUT}>&- {LAB_ERR}>&- &
    LAB_STEP_PID=$!
    wait "$LAB_STEP_PID" || status=$?
    LAB_STEP_PID=
    return "$status"
}

# on_each_node CMD...: CMD once on every node of the job (one srun task per node), as a step.
on_each_node() {
    run_step srun --nodes="$NNODES" --ntasks="$NNODES" --ntasks-per-node=1 \
        --kill-on-bad-exit=1 "$@"
}

# local_dir_on_every_node: make JOB_LOCAL (the same path) on the node-local disk of every
# node, so that every task finds its node's copy there; removed there at the end of the job.
local_dir_on_every_node() {
    [[ $NNODES -gt 1 ]] || return 0
    LAB_LOCAL_EVERYWHERE=1
    # The name is visible in the first node's /tmp, so another user could make it first on
    # another node: there it must be created now (no -p), unless it is the first node's own
    # directory (a real directory, not a link, owned by us); else the job stops.
    on_each_node bash -c '[[ -d $0 && ! -L $0 && -O $0 ]] || mkdir -m 700 -- "$0"' "$JOB_LOCAL" ||
        lab_die "could not make the job's own $JOB_LOCAL on every node (one existed already" \
            "and is not this job's): set IOLAB_NODE_LOCAL to a directory of your own"
}

# remove_at_end DIR: a directory the job made elsewhere (e.g. on scratch) to delete at the end.
remove_at_end() {
    LAB_EXTRA_CLEANUP+=("$1")
}

lab_job_end() {
    local status=$? dir
    trap - TERM
    # A trap may fire inside a step whose output is redirected to a file: talk to the job's log.
    exec >&"$LAB_OUT" 2>&"$LAB_ERR"
    if [[ -n "$LAB_STEP_PID" ]]; then
        kill -TERM "$LAB_STEP_PID" 2>/dev/null || true
        wait "$LAB_STEP_PID" 2>/dev/null || true
    fi
    if mkdir -p "$RESULTS" && cp -R "$LOCAL_RESULTS/." "$RESULTS/"; then
        echo "results copied back to $RESULTS"
    else
        echo "error: could not copy the results back to $RESULTS" >&2
        status=1
    fi
    for dir in "${LAB_EXTRA_CLEANUP[@]}" "$JOB_LOCAL"; do
        rm -rf -- "$dir"
    done
    if [[ -n "$LAB_LOCAL_EVERYWHERE" ]]; then
        # The other nodes' copies. After the SIGTERM before the time limit (or scancel
        # --batch --signal=TERM) the job still lives and this step runs; after a plain
        # scancel, which ends the whole job, only the site's end-of-job cleanup of the
        # node-local disk can remove them.
        # Only where it is this job's own directory: a node where someone else's stood under
        # that name (local_dir_on_every_node stopped there) keeps it.
        timeout 120 srun --nodes="$NNODES" --ntasks="$NNODES" --ntasks-per-node=1 \
            bash -c '[[ ! -d $0 || -L $0 || ! -O $0 ]] || rm -rf -- "$0"' "$JOB_LOCAL" ||
            echo "warning: could not remove $JOB_LOCAL on every node" >&2
    fi
    echo "removed the node-local directory $JOB_LOCAL"
    if [[ -n "$LAB_JOB_DONE" && $status -eq 0 ]]; then
        echo "COMPLETED" >"$RESULTS/status" || true
        echo "job $SLURM_JOB_ID: COMPLETED"
    else
        [[ $status -ne 0 ]] || status=1
        echo "FAILED $status" >"$RESULTS/status" || true
        echo "job $SLURM_JOB_ID: FAILED (exit $status); partial results in $RESULTS" >&2
    fi
    exit "$status"
}

# scratch_workdir: the per-user lab directory on $SCRATCH (made and marked by iolab, so
# `make clean` knows it), or the workspace's tmp when SCRATCH is not set.
scratch_workdir() {
    "$PY" - <<'EOF'
import os
from pathlib import Path

from iolab.core.errors import LabError
from iolab.storage.locations import discover_locations, user_dir
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.workspace import workdir

scratch = os.environ.get("SCRATCH")
if not scratch:
    print(ensure_writable_dir(workdir() / "tmp"))
elif not Path(scratch).is_dir():
    raise SystemExit(f"error: SCRATCH={scratch} is not a directory; fix it or unset it")
else:
    base = Path(scratch).resolve()
    location = next(loc for loc in discover_locations(probe=False) if loc.base == base)
    try:
        print(user_dir(location))
    except LabError as err:
        raise SystemExit(f"error: {err}")
EOF
}
