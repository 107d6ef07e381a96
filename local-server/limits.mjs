// Descriptor limits of the local server and what the launcher does with them.
//
// workerd calls accept() in a loop and aborts the whole process when it fails
// with EMFILE (kj/async-io-unix.c++ treats every accept error but a few network
// ones as fatal), losing every socket it holds. Connections that never become
// sockets hold descriptors too, and the worker cannot see them, let alone close
// them: an idle connection stays until the runtime's 15 s header timeout, a
// refused one until its 5 s keep-alive timeout (neither is configurable in
// workerd). So the admission ceiling alone does not keep workerd alive.
//
// There is no soft limit to raise: Node raises its own soft limit to the hard
// limit when it starts, so the launcher and workerd both run at the hard limit
// whatever `ulimit -Sn` said. What remains is how the limit is shared:
// - gate (`--gate on`; the default below DIRECT_MIN_LIMIT): the launcher
//   accepts connections itself and relays them to workerd over a Unix socket.
//   It closes connections that send nothing, refuses with 503 past its
//   connection cap, and survives EMFILE (libuv then accepts and drops
//   connections). Costs: two launcher descriptors per connection, and memory
//   and CPU to relay every frame (docs/security.md has the figures).
// - direct (`--gate off`; the default from DIRECT_MIN_LIMIT): nothing in front
//   of workerd; the ceiling is a quarter of the limit, so connections that are
//   not sockets yet have three times the ceiling to themselves.
// `--ceiling N` moves the ceiling (to measure capacity near the limit), at the
// price of that room.

import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";

/** From this limit on, direct mode keeps 196,608 or more descriptors spare: a storm must open that many connections within 15 s. */
export const DIRECT_MIN_LIMIT = 262_144;
/** setrlimit refuses more than fs.nr_open; use this when the limit is unlimited and nr_open unknown. */
const FALLBACK_NR_OPEN = 1_048_576;

const limitValue = (text) => (text === "unlimited" ? Infinity : Number(text));

/** @param {string} text a /proc/<pid>/limits file */
function parseNofile(text) {
  const line = text.split("\n").find((l) => l.startsWith("Max open files"));
  const [soft, hard] = (line?.split(/\s{2,}/).slice(1, 3) ?? []).map(limitValue);
  if (soft === undefined || Number.isNaN(soft)) return { soft: 1024, hard: 1024 };
  return { soft, hard: hard === undefined || Number.isNaN(hard) ? soft : hard };
}

/** The RLIMIT_NOFILE soft and hard limits of `pid` (default: this process, and so every child it starts). */
export function descriptorLimits(pid = "self") {
  try {
    return parseNofile(readFileSync(`/proc/${pid}/limits`, "utf8"));
  } catch {
    // No /proc (macOS): the shell reports this process's limits, which it inherits.
    try {
      const [soft, hard] = execFileSync("/bin/sh", ["-c", "ulimit -Sn; ulimit -Hn"], { encoding: "utf8" }).trim().split(/\s+/).map(limitValue);
      if (soft !== undefined && !Number.isNaN(soft)) return { soft, hard: hard === undefined || Number.isNaN(hard) ? soft : hard };
    } catch {
      // Fall through to a common default.
    }
    return { soft: 1024, hard: 1024 };
  }
}

function nrOpen() {
  try {
    return Number(readFileSync("/proc/sys/fs/nr_open", "utf8").trim()) || FALLBACK_NR_OPEN;
  } catch {
    return FALLBACK_NR_OPEN;
  }
}

/**
 * Highest descriptor count at which upgrades are admitted when nothing else
 * needs room. The rest is kept for storage files, refused connections until
 * they are answered, and sockets accepted between two descriptor samples
 * (handshake rate × sample interval).
 */
export function ceilingFor(limit) {
  return limit - Math.max(Math.min(256, Math.floor(limit / 2)), Math.ceil(limit * 0.05));
}

/**
 * What the launcher does with the descriptor limit it runs under.
 * @param {{ soft: number; hard: number }} limits
 * @param {"auto" | "on" | "off"} gate
 * @param {number | null} ceilingOverride
 */
export function planDescriptors(limits, gate = "auto", ceilingOverride = null) {
  // What this process has now, and so what workerd inherits.
  const limit = Math.max(64, Math.min(limits.soft, nrOpen()));
  const mode = gate === "on" || (gate === "auto" && limit < DIRECT_MIN_LIMIT) ? "gate" : "direct";
  const ceiling = Math.min(ceilingOverride ?? (mode === "direct" ? Math.floor(limit / 4) : ceilingFor(limit)), ceilingFor(limit));
  // The gate runs in the launcher: two descriptors per relayed connection, one
  // per connection still waiting for its request head, and a reserve for the
  // launcher itself. Waiting connections may use what relayed ones leave, and
  // always have at least `pendingMin`.
  const gateDescriptors = limit - Math.max(48, Math.ceil(limit * 0.03));
  const pendingMin = Math.max(16, Math.ceil(limit * 0.05));
  const gateConnections = Math.max(1, Math.floor((gateDescriptors - pendingMin) / 2));
  // Relayed connections that upgrades may not take, so publishing works with a full house.
  const reservedForHttp = Math.min(Math.floor(gateConnections / 2), Math.max(16, Math.ceil(gateConnections * 0.05)));
  return {
    mode,
    forced: gate !== "auto",
    limit,
    ceiling,
    /** Direct mode: descriptors left for connections that are not sockets yet. */
    spare: limit - ceiling,
    gateDescriptors,
    gateConnections,
    reservedForHttp,
  };
}

/** Descriptors `pid` holds now (0 when it is gone). */
export function countDescriptors(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}
