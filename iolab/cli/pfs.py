"""`python -m iolab pfs up | status | layout | measure | down`: a private CephFS on this machine;
`pfs client PATH`: what a learner's own cluster file system lets them count.

(iolab.storage.cephfs; the lessons' measurements on it: iolab.hpc.cephfs_lessons.)

For a laptop, a VM, a compute node or CI, where no parallel file system is at hand: its
servers' counters show what the lessons' effects cost a real one. It is the size of a
benchmark, so on a login node it is refused unless the node is yours alone.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
from pathlib import Path

from iolab.cli.options import add_budget_option, add_json_option
from iolab.core.errors import LabError
from iolab.core.options import Bounds, int_option, path_option
from iolab.storage import cephfs

# heavy imports (pandas via iolab.core.tables, iolab.hpc) are local to the functions that
# use them: a refused option or --help starts in a fraction of a second.

#: OSDs to start: one is a working file system, four show striping across servers.
OSDS = Bounds(
    1,
    8,
    "OSDs",
    "each OSD is a daemon of about 50-80 MB and a file of "
    f"{cephfs.OSD_FILE_MIB} MiB (sparse); eight already outnumber a laptop's cores",
)
#: Up/down rounds of `pfs record`.
ROUNDS = Bounds(1, 9, "rounds", "each round starts and ends a whole cluster (about 40 s)")
#: Stripe count of the layout check's file.
STRIPES = Bounds(1, 8, "stripes", "the cluster has at most 8 OSDs")


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pfs",
        help="a private CephFS on this machine: up, status, down",
        description=(
            "Start a real parallel file system as you (a Ceph monitor, manager, OSDs "
            "on files, a metadata server; cephx on; loopback only), mount it with "
            "ceph-fuse in the workspace, and end it leaving nothing behind."
        ),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("up", help="start the cluster and mount it")
    start.add_argument(
        "--osds",
        type=int_option("--osds", OSDS),
        default=cephfs.DEFAULT_OSDS,
        help=f"OSDs to start (default: {cephfs.DEFAULT_OSDS})",
    )
    add_budget_option(start)
    layout = actions.add_parser(
        "layout",
        help="write a file with a layout and check every "
        "object against the lab's striping model (lesson 07)",
    )
    layout.add_argument(
        "--stripe-count",
        type=int_option("--stripe-count", STRIPES),
        default=4,
        help="stripe count of the test file (default: 4)",
    )
    measure = actions.add_parser(
        "measure",
        help="the lessons' measurements on your cluster: layouts (07), the five readers "
        "with the servers' counters (02), two clients writing one file (08), metadata "
        "rates beside the local disk with the MDS's requests and latencies (06), staging "
        "to the local disk (11), two readers under strace on a fresh and a warm client (12)",
    )
    measure.add_argument(
        "--out", type=path_option("--out"), help="also write the record as JSON to this file"
    )
    record = actions.add_parser(
        "record",
        help="maintainers: start and end a cluster ROUNDS times "
        "(up time, memory, down time), then measure the lessons on one "
        "and write the record the notebooks show (make record-pfs)",
    )
    record.add_argument(
        "--out",
        type=path_option("--out"),
        required=True,
        help="the JSON record to write, e.g. reference/bench-recorded/pfs.json",
    )
    record.add_argument(
        "--rounds",
        type=int_option("--rounds", ROUNDS),
        default=3,
        help="up/down rounds for the medians (default: 3)",
    )
    add_budget_option(record)
    client = actions.add_parser(
        "client",
        help="which shared file system PATH is on (Lustre, NFS, CephFS, GPFS), the counters "
        "its client lets you read now, and what needs an administrator",
    )
    client.add_argument("path", type=path_option("PATH"), help="a file or folder to look at")
    add_json_option(client)
    for name, text in (
        ("status", "daemons, OSDs, MDS, mount and memory of your cluster"),
        ("down", "unmount and end everything the cluster started"),
    ):
        action = actions.add_parser(name, help=text)
        add_json_option(action)
    add_json_option(start)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.action == "record":
        return _record(args.out, args.rounds, args.compute_node)
    if args.action == "client":
        return _print_client(args.path, args.json)
    if args.action == "up":
        cluster = cephfs.up(
            args.osds,
            compute_node=args.compute_node,
            progress=lambda step: print(f"starting: {step}", file=sys.stderr),
        )
        return _print_status(cluster, args.json)
    if args.action in ("status", "layout", "measure"):
        found = cephfs.current()
        if found is None:
            raise LabError("no CephFS of yours is up; start one with `python -m iolab pfs up`")
        cluster = found
        if args.action == "layout":
            return _print_layout(cluster, args.stripe_count)
        if args.action == "measure":
            try:
                return _measure(cluster, args.out)
            except OSError as err:
                if err.errno != errno.EDQUOT:
                    raise
                raise LabError(
                    f"your CephFS is full: it holds at most {cephfs.QUOTA_MIB} MiB of files "
                    f"(a quota that keeps its OSD files small); remove files from "
                    f"{cluster.mount_point}, or end it with `python -m iolab pfs down` and "
                    "start it again"
                ) from None
        return _print_status(cluster, args.json)
    ended = cephfs.down()
    if args.json:
        print(json.dumps({"ended": ended}))
    else:
        print("CephFS ended: nothing of it is left" if ended else "no CephFS of yours was up")
    return 0


def _print_client(path: Path, as_json: bool) -> int:
    """What the client of PATH's file system shows a user: its kind, counters, and limits."""
    from iolab.core.tables import to_markdown
    from iolab.hpc import fs_client

    if not path.exists():
        raise LabError(
            f"{path} does not exist: give a file or folder on the file system to look at"
        )
    view = fs_client.identify(path)
    counters = fs_client.client_counters(view)
    if as_json:
        print(json.dumps({**view.to_dict(), "counters": counters}))
        return 0
    print(f"{path} is on {view.name} ({view.fs_type}, mounted at {view.mount_point})")
    print(f"what you can count here: {view.user_counters}")
    if counters:
        top = sorted(counters.items(), key=lambda item: -item[1])[:12]
        import pandas as pd

        print(to_markdown(pd.DataFrame(top, columns=["counter", "count"])))
    elif view.kind in ("lustre", "nfs"):
        print("no counters could be read now (lctl missing or refused, or no such mount)")
    print(f"what needs an administrator: {view.needs_admin}")
    return 0


def _print_status(cluster: cephfs.Cluster, as_json: bool) -> int:
    state = cephfs.status(cluster)
    if as_json:
        print(json.dumps(state))
        return 0
    alive = sum(state["daemons_alive"].values())
    print(
        f"CephFS {state['ceph_version']} mounted at {state['mount_point']}"
        f"{'' if state['mounted'] else ' (NOT mounted)'}"
    )
    print(
        f"  {state['osds_up']} of {state['osds']} OSDs up, metadata server "
        f"{'active' if state['mds_active'] else 'NOT active'}, health {state['health']}"
    )
    print(
        f"  {alive} of {len(state['daemons_alive'])} processes alive, "
        f"{state['resident_mib']} MiB resident; up in {state['started_s']} s; "
        f"monitor on 127.0.0.1:{state['mon_port']}"
    )
    print(
        f"  at most {state['quota_mib']} MiB of files (a quota); the OSDs' files take "
        f"{state['osd_files_on_disk_mib']} MiB on disk"
    )
    print("  end it with `python -m iolab pfs down`")
    return 0


def _print_layout(cluster: cephfs.Cluster, stripe_count: int) -> int:
    import pandas as pd

    from iolab.core.tables import to_markdown
    from iolab.hpc.cephfs_lessons import layout_check

    check = layout_check(cluster, stripe_count)
    print(to_markdown(pd.DataFrame(check["objects"])))
    print(
        f"\n{check['agree']} of {check['objects_checked']} objects agree with the model "
        f"(stripe unit 1 MiB, stripe count {stripe_count}, object size 4 MiB, a file of "
        f"{check['file_bytes']:,} bytes)"
    )
    print(
        f"bytes per OSD, model: {check['model_bytes_per_osd']}; the OSDs' own write counters: "
        f"{check['counted_write_bytes_per_osd']}"
    )
    return 0 if check["agree"] == check["objects_checked"] else 1


def _measure(cluster: cephfs.Cluster, out) -> int:
    import pandas as pd

    from iolab.core.atomic import atomic_output
    from iolab.core.tables import to_markdown
    from iolab.hpc.cephfs_lessons import measure_all
    from iolab.storage.cephfs_mdrates import side_by_side

    print(
        "measuring layouts, the five readers (the dataset is made on the CephFS first), "
        "two clients writing one file, metadata rates, staging to the local disk and two "
        "readers under strace; a few minutes...",
        file=sys.stderr,
    )
    record = measure_all(cluster)
    for layout in record["layouts"]:
        print(
            f"stripe count {layout['stripe_count']}: {layout['agree']} of "
            f"{layout['objects_checked']} objects agree with the model"
        )
    print()
    print(to_markdown(pd.DataFrame(record["readers"]).round(3)))
    print()
    print(to_markdown(pd.DataFrame(record["shared_writes"]).round(3)))
    print()
    print(to_markdown(side_by_side(record["metadata"]).round(1).reset_index()))
    print()
    print(to_markdown(pd.DataFrame(record["staging"]).round(3)))
    print()
    if record["profile"]:
        print(to_markdown(pd.DataFrame(record["profile"]).round(3)))
    else:
        print(f"lesson 12's profile was not measured: {record['profile_problem']}")
    if out is not None:
        with atomic_output(out) as partial:
            partial.write_text(json.dumps(record, indent=1) + "\n")
        print(f"\nSaved: {out}")
    return 0


def _record(out, rounds: int, compute_node: bool | None) -> int:
    """Rounds of up/down for the medians of start-up time, memory and teardown, then the
    lessons' measurements on one more cluster; one JSON record."""
    import statistics
    import time

    from iolab.core.atomic import atomic_output
    from iolab.hpc.cephfs_lessons import measure_all

    runs = []
    for number in range(1, rounds + 1):
        print(f"round {number} of {rounds}: up, status, down", file=sys.stderr)
        cluster = cephfs.up(compute_node=compute_node)
        state = cephfs.status(cluster)
        start = time.monotonic()
        cephfs.down()
        runs.append(
            {
                "up_s": state["started_s"],
                "resident_mib": state["resident_mib"],
                "down_s": round(time.monotonic() - start, 1),
            }
        )
    print("measuring the lessons on a fresh cluster (a few minutes)", file=sys.stderr)
    cluster = cephfs.up(compute_node=compute_node)
    try:
        record = measure_all(cluster)
    finally:
        cephfs.down()
    record["bench"] = {
        "rounds": runs,
        **{
            f"{key}_median": statistics.median(r[key] for r in runs)
            for key in ("up_s", "resident_mib", "down_s")
        },
    }
    with atomic_output(out) as partial:
        partial.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["bench"]))
    print(f"Saved: {out}")
    return 0
