"""`kraftlab quorum describe --status|--replication`: what kafka-metadata-quorum.sh prints;
`kraftlab quorum add-controller | remove-controller`: its KIP-853 verbs.

add-controller starts one more controller process (an observer of the bootstrap voters, in
cluster.json), waits until the leader sees it fetch, and asks the leader to add it
(POST /quorum/voters, AddRaftVoter); remove-controller asks the leader to remove a voter
(DELETE /quorum/voters/ID, RemoveRaftVoter; the process keeps running as an observer, `kraftlab
cluster kill ID` stops it). Both retry what the leader answers as retriable (REQUEST_TIMED_OUT:
another change in flight or uncommitted, the new voter not caught up yet; no leader) until
`--timeout`, and read an indeterminate answer followed by DUPLICATE_VOTER / VOTER_NOT_FOUND as
done.

Both views come from the active controller (Kafka sends DescribeQuorum to the leader): the command
asks any answering controller who leads, then asks the leader. Voters are shown as `[1,2,3]` (the
3.8 format: kraftlab has no directory ids). `--human-readable` shows timestamps as "N ms ago".
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from harness.admin.client import AdminError
from harness.admin.describe_quorum import format_replication, format_status
from harness.cli.common import add_data_dir, data_dir_of, progress
from harness.launcher import cluster as cl


def cmd_describe(args: argparse.Namespace) -> int:
    try:
        cluster = cl.ClusterFile.load(data_dir_of(args))
        client = cl.leader_client(cluster)
        if args.replication:
            print(format_replication(client.get_json("/quorum/replication"), args.human_readable))
        else:
            print(format_status(client.get_json("/quorum/status")))
    except (cl.ClusterError, AdminError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


RETRIABLE = {"REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE",
             "NOT_CONTROLLER"}
DONE_IF_RETRIED = {"add": "DUPLICATE_VOTER", "remove": "VOTER_NOT_FOUND"}


def change_voters(
    cluster: cl.ClusterFile, kind: str, method: str, path: str, body: Any, timeout_s: float
) -> dict[str, Any]:
    """Send one voter change to the leader, retrying retriable answers until `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    tried = False
    while True:
        try:
            status, answer = cl.leader_client(cluster).request(method, path, body)
        except (cl.ClusterError, OSError) as exc:
            status, answer = 503, {"error": "LEADER_NOT_AVAILABLE", "message": str(exc)}
        error = answer.get("error") if isinstance(answer, dict) else None
        if status < 400:
            return dict(answer)
        if tried and error == DONE_IF_RETRIED[kind]:
            return {"kind": kind, "note": f"{error} after a retry: done earlier"}
        if error not in RETRIABLE or time.monotonic() >= deadline:
            raise AdminError(status, answer)
        tried = True
        progress(f"{error}: {answer.get('message', '')}; retrying")
        time.sleep(0.2)  # retry backoff under the deadline


def wait_fetching(cluster: cl.ClusterFile, node_id: int, timeout_s: float) -> None:
    """Until the leader lists `node_id` among the replicas that fetch from it (an observer)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            rows = cl.leader_client(cluster).get_json("/quorum/replication")
            if any(r["node_id"] == node_id for r in rows):
                return
        except (cl.ClusterError, AdminError, OSError):
            pass
        time.sleep(0.1)  # poll interval under the deadline
    raise cl.ClusterError(f"controller {node_id} did not start fetching within {timeout_s:.0f} s")


def cmd_add_controller(args: argparse.Namespace) -> int:
    try:
        data_dir = data_dir_of(args).resolve()
        cluster = cl.ClusterFile.load(data_dir)
        node_id = args.id if args.id is not None else max(n.id for n in cluster.controllers) + 1
        node = cl.add_controller(cluster, data_dir, node_id)
        progress(f"started controller {node.id} (pid {node.pid}) as an observer")
        wait_fetching(cluster, node.id, args.timeout)
        body = {"node_id": node.id, "endpoint": f"{node.host}:{node.rpc_port}"}
        answer = change_voters(cluster, "add", "POST", "/quorum/voters", body, args.timeout)
    except (cl.ClusterError, AdminError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"controller {node_id} added to the voters: {answer.get('current_voters', '?')}")
    return 0


def cmd_remove_controller(args: argparse.Namespace) -> int:
    try:
        cluster = cl.ClusterFile.load(data_dir_of(args).resolve())
        cluster.node(args.id)
        answer = change_voters(cluster, "remove", "DELETE", f"/quorum/voters/{args.id}", None,
                               args.timeout)  # fmt: skip
    except (cl.ClusterError, AdminError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"controller {args.id} removed from the voters: {answer.get('current_voters', '?')}"
          f" (it still runs, as an observer)")  # fmt: skip
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("quorum", help="describe the metadata quorum, add or remove voters")
    verbs = parser.add_subparsers(dest="quorum_command", metavar="VERB")
    verbs.required = True
    describe = verbs.add_parser("describe", help="like kafka-metadata-quorum.sh describe")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--status", action="store_true", help="leader, epoch, HW, lag, voters")
    which.add_argument("--replication", action="store_true", help="per-replica offsets and lag")
    describe.add_argument("--human-readable", action="store_true",
                          help="timestamps as 'N ms ago'")
    add_data_dir(describe)
    describe.set_defaults(handler=cmd_describe)
    add = verbs.add_parser("add-controller", help="start a controller and add it to the voters "
                           "(KIP-853 AddRaftVoter)")
    add.add_argument("--id", type=int, default=None, help="node id (default: highest + 1)")
    add.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    add_data_dir(add)
    add.set_defaults(handler=cmd_add_controller)
    remove = verbs.add_parser("remove-controller", help="remove a controller from the voters "
                              "(KIP-853 RemoveRaftVoter)")
    remove.add_argument("id", type=int)
    remove.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    add_data_dir(remove)
    remove.set_defaults(handler=cmd_remove_controller)
