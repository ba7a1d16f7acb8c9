#!/usr/bin/env python3
"""WAL frames per group commit of events, and what each index of the events
table adds to them: the pages the one committing thread writes (each frame is
two pwrites) before its sync. Takes the events table and its indexes from a
database ingest made, so it measures the schema as migrated.

    tests/bench/wal_frames.py DATA_DIR/tocsin.sqlite3 [events per commit=20]

Each variant is a fresh file with 100,000 events already in it (so the
indexes are deep), then 400 commits of the given size; the frame count comes
from the WAL's growth (checkpoints off), not from timing, so the machine's
noise does not touch it.
"""

import os
import sqlite3
import sys
import tempfile
import time
import uuid

PREFILL = 100_000
COMMITS = 400


def schema(path):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = c.execute(
        "SELECT type, sql FROM sqlite_master WHERE tbl_name = 'events' AND sql IS NOT NULL"
    ).fetchall()
    table = next(sql for kind, sql in rows if kind == "table")
    indexes = [sql for kind, sql in rows if kind == "index"]
    columns = [r[1] for r in c.execute("PRAGMA table_info(events)")]
    return table, indexes, columns


def v7():
    ms = int(time.time() * 1000)
    r = os.urandom(10)
    raw = ms.to_bytes(6, "big") + bytes([0x70 | (r[0] & 0x0F), r[1], 0x80 | (r[2] & 0x3F)]) + r[3:]
    return str(uuid.UUID(bytes=raw))


def event(columns):
    now = time.time()
    values = {
        "id": v7(),
        "org": "bench",
        "project": "bench",
        "channel_name": "bench",
        "title": "Benchmark event",
        "icon": "🚀",
        "tags": '["bench","wrk"]',
        "metadata": '{"n":1,"ok":true}',
        "notify": 0,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        + ".%03dZ" % (int(now * 1000) % 1000),
        "notification_state": "skipped",
        "request_id": str(uuid.uuid4()),
        "priority": "normal",
    }
    return [values.get(c) for c in columns]


def frames(table, indexes, columns, per_commit):
    path = os.path.join(tempfile.mkdtemp(), "frames.sqlite3")
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute(table)
    for sql in indexes:
        c.execute(sql)
    insert = f"INSERT INTO events ({','.join(columns)}) VALUES ({','.join('?' * len(columns))})"
    c.execute("BEGIN")
    for _ in range(PREFILL):
        c.execute(insert, event(columns))
    c.execute("COMMIT")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for _ in range(COMMITS):
        c.execute("BEGIN IMMEDIATE")
        for _ in range(per_commit):
            c.execute(insert, event(columns))
        c.execute("COMMIT")
    page = c.execute("PRAGMA page_size").fetchone()[0]
    wal = os.path.getsize(path + "-wal") - 32
    return wal / (page + 24) / COMMITS


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    per_commit = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    table, indexes, columns = schema(sys.argv[1])
    print(f"WAL frames per commit of {per_commit} events")
    print(f"  {'the schema as it is':58s} {frames(table, indexes, columns, per_commit):5.1f}")
    print(f"  {'the table alone (and its primary key)':58s} {frames(table, [], columns, per_commit):5.1f}")
    for sql in indexes:
        name = sql.split(" ON ", 1)[1]
        print(f"  {'the table and ' + name:58s} {frames(table, [sql], columns, per_commit):5.1f}")


if __name__ == "__main__":
    main()
