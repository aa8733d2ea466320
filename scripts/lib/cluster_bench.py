"""The cost of replication in cleave-server (driven by scripts/cluster-bench.sh).

Each round, in this order: one server with --appendfsync always, one with
everysec, and a three-member group; each gets redis-benchmark SET then GET
on fresh data directories. Then BENCH_KILLS times: kill -9 the group's
leader, time until the two others agree on a new leader that says it leads,
restart the killed member and let it catch up.
"""

import csv
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REQUESTS = int(os.environ.get("BENCH_REQUESTS", "500000"))
KEYSPACE = int(os.environ.get("BENCH_KEYSPACE", "100000"))
SIZE = int(os.environ.get("BENCH_SIZE", "1024"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "50"))
PIPELINE = int(os.environ.get("BENCH_PIPELINE", "16"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
KILLS = int(os.environ.get("BENCH_KILLS", "20"))
SERVER = "target/release/cleave-server"
OUT = "target/cluster-bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def command(port, *args, timeout=5.0):
    """One RESP request; the reply's first line and any bulk body, as text."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        req = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
        s.sendall(req.encode())
        f = s.makefile("rb")
        line = f.readline().decode().rstrip("\r\n")
        if line.startswith("$") and int(line[1:]) >= 0:
            return f.read(int(line[1:]) + 2)[:-2].decode()
        return line


def info(port):
    try:
        text = command(port, "CLUSTER", "INFO", timeout=1.0)
    except OSError:
        return {}
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


class Member:
    def __init__(self, node_id, work, peers, extra=()):
        self.id = node_id
        self.port = free_port()
        self.raft_port = free_port()
        self.dir = os.path.join(work, f"n{node_id}")
        self.peers = peers
        self.extra = list(extra)
        self.proc = None

    def flag(self):
        return f"{self.id}=127.0.0.1:{self.raft_port},127.0.0.1:{self.port}"

    def start(self, members):
        args = [SERVER, "--dir", self.dir, "--port", str(self.port), "--cluster",
                "--node-id", str(self.id), "--raft-port", str(self.raft_port)]
        for m in members:
            if m.id != self.id:
                args += ["--peer", m.flag()]
        self.proc = subprocess.Popen(args + self.extra, stdout=subprocess.PIPE,
                                     stderr=open(self.dir + ".log", "a"))
        line = self.proc.stdout.readline().decode()
        assert "ready" in line, line

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None


def start_standalone(work, fsync):
    port = free_port()
    d = os.path.join(work, f"single-{fsync}")
    proc = subprocess.Popen([SERVER, "--dir", d, "--port", str(port), "--appendfsync", fsync],
                            stdout=subprocess.PIPE, stderr=open(d + ".log", "a"))
    assert "ready" in proc.stdout.readline().decode()
    return port, [proc], [d]


def start_group(work, n=3):
    members = [Member(i, work, None) for i in range(1, n + 1)]
    for m in members:
        m.start(members)
    assert command(members[0].port, "CLUSTER", "INIT") == "+OK"
    return members, wait_leader(members, ignore=())


def wait_leader(members, ignore, limit=60.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        live = [m for m in members if m.proc and m.id not in ignore]
        named = {info(m.port).get("raft_leader_id") for m in live}
        if len(named) == 1:
            leader = named.pop()
            if leader and int(leader) not in ignore:
                lm = next(m for m in members if m.id == int(leader))
                if info(lm.port).get("raft_state") == "leader":
                    return lm
        time.sleep(0.01)
    raise SystemExit("no leader elected within %ss" % limit)


def cpu_seconds(proc):
    with open(f"/proc/{proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_kib(proc):
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1])
    return 0


def bench(port, test):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(REQUESTS), "-r", str(KEYSPACE),
         "-d", str(SIZE), "-c", str(CLIENTS), "-P", str(PIPELINE), "--csv"],
        capture_output=True, text=True, check=True).stdout.strip().splitlines()
    row = next(csv.reader([out[-1]]))
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    return float(row[1]), float(row[4]), float(row[6])


def run_setup(name, work, rows):
    if name == "group":
        members, leader = start_group(work)
        port, procs = leader.port, [m.proc for m in members]
        dirs = [m.dir for m in members]
    else:
        port, procs, dirs = start_standalone(work, name.split("-")[1])
        members = None
    for test in ("set", "get"):
        cpu0 = sum(cpu_seconds(p) for p in procs)
        rps, p50, p99 = bench(port, test)
        cpu = sum(cpu_seconds(p) for p in procs) - cpu0
        rows.append((name, test, rps, p50, p99, cpu, sum(peak_rss_kib(p) for p in procs)))
        print(f"{name:16} {test}: {rps:10,.0f} ops/s  P50 {p50:6.2f} ms  P99 {p99:7.2f} ms  "
              f"server CPU {cpu:6.1f} s", flush=True)
    disk = sum(int(subprocess.run(["du", "-sb", d], capture_output=True, text=True).stdout.split()[0])
               for d in dirs)
    rows.append((name, "disk", disk, 0, 0, 0, 0))
    if members:
        for m in members:
            m.kill()
    else:
        for p in procs:
            p.kill()
            p.wait()
    for d in dirs:
        subprocess.run(["rm", "-rf", d])


def elections(work):
    members, leader = start_group(work)
    times = []
    for i in range(KILLS):
        subprocess.run(["redis-benchmark", "-p", str(leader.port), "-t", "set", "-n", "2000",
                        "-r", "1000", "-d", str(SIZE), "-q"], capture_output=True, check=True)
        killed = leader
        t0 = time.monotonic()
        killed.kill()
        leader = wait_leader(members, ignore=(killed.id,))
        times.append(time.monotonic() - t0)
        print(f"kill {i + 1:2}: node {killed.id} -> node {leader.id} in {times[-1]:.3f} s", flush=True)
        killed.start(members)
        applied = int(info(leader.port).get("raft_last_applied_index", "0"))
        deadline = time.monotonic() + 60
        while int(info(killed.port).get("raft_last_applied_index", "0") or 0) < applied:
            assert time.monotonic() < deadline, "the restarted member did not catch up"
            time.sleep(0.02)
    for m in members:
        m.kill()
    return times


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_WORK_DIR")) as work:
        for r in range(REPEATS):
            print(f"round {r + 1} of {REPEATS}", flush=True)
            for name in ("single-always", "single-everysec", "group"):
                run_setup(name, work, rows)
        times = elections(work) if KILLS else []
    with open(f"{OUT}/results.csv", "w") as f:
        csv.writer(f).writerows(rows)
    med = {}
    for name in ("single-always", "single-everysec", "group"):
        for test in ("set", "get"):
            sel = [r for r in rows if r[0] == name and r[1] == test]
            med[(name, test)] = [statistics.median(r[i] for r in sel) for i in (2, 3, 4, 5, 6)]
        med[(name, "disk")] = statistics.median(r[2] for r in rows if r[0] == name and r[1] == "disk")
    lines = [f"redis-benchmark -t set|get -n {REQUESTS} -r {KEYSPACE} -d {SIZE} -c {CLIENTS} "
             f"-P {PIPELINE}; medians of {REPEATS} interleaved rounds", "",
             "| setup | test | ops/s | P50 ms | P99 ms | server CPU s | peak RSS MiB (all) | group/single |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in ("single-always", "single-everysec", "group"):
        for test in ("set", "get"):
            rps, p50, p99, cpu, rss = med[(name, test)]
            ratio = ""
            if name == "group":
                a = med[("single-always", test)][0]
                e = med[("single-everysec", test)][0]
                ratio = f"{rps / a:.2f} (always), {rps / e:.2f} (everysec)"
            lines.append(f"| {name} | {test.upper()} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | "
                         f"{cpu:.1f} | {rss / 1024:.0f} | {ratio} |")
    lines.append("")
    for name in ("single-always", "single-everysec", "group"):
        lines.append(f"{name}: data on disk after the run {med[(name, 'disk')] / 2**20:.0f} MiB")
    if times:
        ts = sorted(times)
        lines += ["", f"Election after kill -9 of the leader, {len(ts)} kills: "
                  f"median {statistics.median(ts):.2f} s, min {ts[0]:.2f} s, max {ts[-1]:.2f} s, "
                  f"P90 {ts[int(0.9 * (len(ts) - 1))]:.2f} s",
                  "times: " + ", ".join(f"{t:.2f}" for t in times)]
    text = "\n".join(lines)
    print(text)
    with open(f"{OUT}/summary.md", "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
