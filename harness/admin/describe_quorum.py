"""The text `kafka-metadata-quorum.sh describe --status|--replication` prints, made from the admin
API's /quorum/status and /quorum/replication answers (`kraftlab quorum describe`, and the live
phase of `kraftlab compare`). Voters are shown as `[1,2,3]` (the 3.8 format: kraftlab has no
directory ids); `human` shows timestamps as "N ms ago".
"""

from __future__ import annotations

import json
import time
from typing import Any


def format_status(status: dict[str, Any]) -> str:
    rows = [
        ("ClusterId", status["cluster_id"]),
        ("LeaderId", status["leader_id"]),
        ("LeaderEpoch", status["leader_epoch"]),
        ("HighWatermark", status["high_watermark"]),
        ("MaxFollowerLag", status["max_follower_lag"]),
        ("MaxFollowerLagTimeMs", status["max_follower_lag_time_ms"]),
        ("CurrentVoters", json.dumps(status["current_voters"], separators=(",", ":"))),
        ("CurrentObservers", json.dumps(status["current_observers"], separators=(",", ":"))),
    ]
    return "\n".join(f"{name + ':':<24}{value}" for name, value in rows)


def format_replication(rows: list[dict[str, Any]], human: bool) -> str:
    now_ms = int(time.time() * 1000)

    def ts(value: int) -> str:
        if not human or value < 0:
            return str(value)
        return f"{max(0, now_ms - value)} ms ago"

    header = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
              "Status"]
    table = [header] + [
        [str(r["node_id"]), str(r["log_end_offset"]), str(r["lag"]),
         ts(r["last_fetch_timestamp"]), ts(r["last_caught_up_timestamp"]), r["status"]]
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    )
