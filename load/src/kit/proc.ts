/**
 * Reads a local server's resource use from /proc (Linux). Everything here is
 * best effort: a missing file yields undefined, never an exception, so a run
 * against a remote target or a non-Linux machine still works without samples.
 */
import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { dirname } from "node:path";

/** Kernel clock ticks per second for utime/stime; 100 on every mainstream Linux build. */
const CLOCK_TICKS = 100;
const PAGE_SIZE = 4096;

export interface ProcessSample {
  /** Resident set size, bytes. */
  rssBytes: number;
  /** utime + stime, microseconds (10 ms resolution). */
  cpuUs: number;
  /** Open descriptors. */
  fds: number;
  threads: number;
}

export interface MachineSample {
  memAvailableBytes: number;
  /** Kernel memory held by TCP sockets (all processes in this network namespace), bytes. */
  tcpMemBytes: number;
  tcpInUse: number;
  /** Cumulative busy and total jiffies across all cores, for utilisation between two samples. */
  cpuBusyTicks: number;
  cpuTotalTicks: number;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** utime + stime of a process, µs (10 ms resolution); undefined once it is gone. */
export function readCpuUs(pid: number): number | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  // Fields after the parenthesised command name (which may contain spaces).
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
}

/** utime + stime of a process, ms; throws once it is gone (a measured server must not vanish mid-run). */
export function cpuMs(pid: number): number {
  const us = readCpuUs(pid);
  if (us === undefined) throw new Error(`process ${pid} is gone`);
  return us / 1000;
}

/** Resident set size of a process, MB (1,048,576 bytes); throws once it is gone. */
export function rssMb(pid: number): number {
  const bytes = readRssBytes(pid);
  if (bytes === undefined) throw new Error(`process ${pid} is gone`);
  return bytes / 1048576;
}

/** Resident set size of a process, bytes; undefined once it is gone. */
export function readRssBytes(pid: number): number | undefined {
  const status = read(`/proc/${pid}/status`);
  return status === undefined ? undefined : Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
}

/** Open descriptors of a process (a directory listing: costly with many sockets); -1 when unreadable. */
export function countFds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return -1;
  }
}

/** Memory mappings of a process (every SQLite database maps its WAL index; the kernel allows vm.max_map_count). */
export function countMaps(pid: number): number | undefined {
  const maps = read(`/proc/${pid}/maps`);
  return maps === undefined ? undefined : maps.split("\n").length - 1;
}

export function sampleProcess(pid: number): ProcessSample | undefined {
  const cpuUs = readCpuUs(pid);
  const status = read(`/proc/${pid}/status`);
  if (cpuUs === undefined || !status) return undefined;
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const threads = Number(/Threads:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { rssBytes: rssKb * 1024, cpuUs, fds: countFds(pid), threads };
}

/** The machine's load averages over 1, 5 and 15 minutes, as /proc/loadavg prints them. */
export function loadAverage(): string {
  return (read("/proc/loadavg") ?? "").split(" ").slice(0, 3).join(" ");
}

/** This process's hard "Max open files" limit (what the processes it starts may raise theirs to). */
export function hardDescriptorLimit(): number {
  const hard = /Max open files\s+\S+\s+(\S+)/.exec(read("/proc/self/limits") ?? "")?.[1];
  return hard === undefined || hard === "unlimited" ? Infinity : Number(hard);
}

export function sampleMachine(): MachineSample {
  const meminfo = read("/proc/meminfo") ?? "";
  const sockstat = read("/proc/net/sockstat") ?? "";
  const cpu = (read("/proc/stat") ?? "").split("\n")[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
  const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  const tcp = /TCP: inuse (\d+).*mem (\d+)/.exec(sockstat);
  return {
    memAvailableBytes: Number(/MemAvailable:\s+(\d+)/.exec(meminfo)?.[1] ?? 0) * 1024,
    tcpMemBytes: Number(tcp?.[2] ?? 0) * PAGE_SIZE,
    tcpInUse: Number(tcp?.[1] ?? 0),
    cpuBusyTicks: total - idle,
    cpuTotalTicks: total,
  };
}

export function processName(pid: number): string | undefined {
  return read(`/proc/${pid}/comm`)?.trim();
}

export function processCommandLine(pid: number): string | undefined {
  return read(`/proc/${pid}/cmdline`)?.split("\0").filter(Boolean).join(" ");
}

/** The soft "Max open files" limit of a process. */
export function descriptorLimit(pid: number): number | undefined {
  const limits = read(`/proc/${pid}/limits`);
  const match = limits && /Max open files\s+(\d+)/.exec(limits);
  return match ? Number(match[1]) : undefined;
}

/** Inodes of sockets listening on `port` (IPv4 and IPv6). */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const lines = (read(table) ?? "").split("\n").slice(1);
    for (const line of lines) {
      const cols = line.trim().split(/\s+/);
      // cols: sl local_address rem_address st ... inode at index 9; st 0A = LISTEN
      if (cols.length < 10 || cols[3] !== "0A") continue;
      if (cols[1]?.split(":")[1] === hexPort) inodes.add(cols[9] as string);
    }
  }
  return inodes;
}

/**
 * Finds the process holding the listening socket of `port` by matching socket
 * inodes in /proc/PID/fd. Only processes of the same user are readable, which
 * is exactly the case of a local server started by us.
 */
export function findListeningPid(port: number): number | undefined {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return undefined;
  const candidates: number[] = [];
  let pids: string[] = [];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    for (const inode of socketInodes(Number(pid))) {
      if (!inodes.has(inode)) continue;
      candidates.push(Number(pid));
      break;
    }
  }
  if (candidates.length <= 1) return candidates[0];
  // A launcher may share the listening socket with its runtime; the one doing the work has the most memory.
  return candidates.map((pid) => ({ pid, rss: sampleProcess(pid)?.rssBytes ?? 0 })).sort((a, b) => b.rss - a.rss)[0]?.pid;
}

/** Inodes of the sockets a process holds. */
function socketInodes(pid: number): Set<string> {
  const owned = new Set<string>();
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return owned;
  }
  for (const fd of fds) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) owned.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  return owned;
}

/** The local server's private directory (where its admin socket is), from the unix sockets its workerd holds. */
export function privateDirOf(workerdPid: number): string | undefined {
  const owned = socketInodes(workerdPid);
  const path = (read("/proc/net/unix") ?? "")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .find((cols) => cols.length >= 8 && owned.has(cols[6] as string))?.[7];
  return path === undefined ? undefined : dirname(path);
}
