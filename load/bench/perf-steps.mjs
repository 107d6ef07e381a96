// Turns `perf script` output of a workerd process (run with V8's
// --perf-basic-prof, so JIT frames read "JS:*name worker.js:LINE:COL") into
// per-step shares: each sample goes to the innermost JavaScript frame of the
// bundle, mapped back to its source file through the bundle's inline source
// map, and within that step to "the step's own JavaScript" or "the runtime
// beneath it" (a native frame below the JS one: SQLite under the history
// write, the send path under the fan-out, the RPC machinery under a stub
// call). Samples with no JavaScript frame of the bundle are the runtime's
// own, classified by what their stack holds (GC, SQLite, kernel, HTTP, ...).

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

/** Which step a source file of the bundle belongs to; first match wins. */
const FILE_STEPS = [
  [/worker\/auth\//, "auth (publish key, access)"],
  [/worker\/(request-body|publish-body)\.ts|common\/utf8\.ts/, "body read and validation"],
  [/worker\/(service-counters|analytics|metrics)\.ts|durable-objects\/(room|engine)\/counters\.ts|common\/counters\.ts/, "counters"],
  [/durable-objects\/coordinator\/|worker\/coordinator/, "registry (coordinator)"],
  [/durable-objects\/room\/history\.ts/, "history row"],
  [/durable-objects\/room\/memory-history\.ts|durable-objects\/leaf\/ring\.ts/, "history in memory (ephemeral rooms, leaves)"],
  [/durable-objects\/(room|engine)\/(delivery|socket-state|send-window|frames|message|cursor|stream)\.ts/, "fan-out and window accounting"],
  [/durable-objects\/room\/publishing\.ts/, "publish: seq, flush scheduling"],
  [/durable-objects\/(room|engine)\/sweeper\.ts/, "sweeper (alarm, storage hand-back)"],
  [/durable-objects\/engine\/(socket-engine|presence|attachment|socket-mark|client-frames)\.ts/, "socket engine: accept, presence, client frames"],
  [/durable-objects\/room\/leaves\.ts|leaf-link\.ts|worker\/placement\.ts/, "sharding checks"],
  [/durable-objects\/room\//, "room: RPC entry, other"],
  [/node_modules\/hono\/|worker\/(app|index|errors|env|local-admission|local-routes)\.ts/, "routing (Hono, handlers, answer)"],
  [/common\/log\.ts/, "logging"],
  [/protocol\//, "protocol helpers"],
  // The bare baseline's worker does routing, body read and answer in one function; its room, the publish.
  [/baselines\/bare-workerd\/worker\.ts/, "routing (Hono, handlers, answer)"],
  [/baselines\/bare-workerd\/room\.ts/, "room: RPC entry, other"],
  // The PartyServer baseline: its worker (routePartykitRequest and the room's onConnect/onRequest), and the library.
  [/baselines\/partyserver\/worker\.ts/, "PartyServer baseline: worker and room (worker.ts)"],
  [/node_modules\/partyserver\//, "PartyServer library (routing, Server, connections)"],
];

/** Stacks without a frame of the bundle: the runtime's own work. */
const RUNTIME_STEPS = [
  [/Heap::|Scavenger|MarkCompact|Sweeper|Marking|ConcurrentMarking|GCTracer|MinorMS|Evacuat/, "runtime: garbage collection"],
  [/fsync|fdatasync|ext4_sync|jbd2|blk_|virtblk|virtqueue/, "runtime: commit (fsync)"],
  [/sqlite3/i, "runtime: SQLite outside a JS call (commit, WAL)"],
  [/tcp_|sock_|inet_|__sys_sendmsg|__sys_recvfrom|sendmsg|recvmsg|writev|epoll/, "runtime: network syscalls"],
  [/Http|http|kj::.*Header/, "runtime: HTTP server and client"],
  [/capnp|Rpc|rpc|JsRpc|Actor|IoContext|jsg::|Worker::Lock|Isolate/, "runtime: RPC, request context, JS entry"],
];

function sourceMapper(bundlePath) {
  if (!bundlePath) return () => undefined;
  let traceMapping;
  try {
    traceMapping = createRequire(import.meta.url)("@jridgewell/trace-mapping");
  } catch {
    return () => undefined;
  }
  const text = readFileSync(bundlePath, "utf8");
  const inline = /\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/.exec(text);
  if (!inline) return () => undefined;
  const map = new traceMapping.TraceMap(JSON.parse(Buffer.from(inline[1], "base64").toString("utf8")));
  return (line, column) => traceMapping.originalPositionFor(map, { line, column: Math.max(0, column - 1) }).source ?? undefined;
}

/**
 * @param {string} perfScript text of `perf script` (default fields: a header line, then one frame per line)
 * @param {{ bundle?: string; script?: string }} options bundle: path of the bundle with an inline source map;
 *   script: the bundle's module name in frames (worker.js)
 * @returns {{ samples: number; steps: Array<{ step: string; own: number; beneath: number; share: number }> }}
 */
export function perfSteps(perfScript, options = {}) {
  const mapSource = sourceMapper(options.bundle);
  const script = (options.script ?? "worker.js").replace(/\./g, "\\.");
  const jsFrame = new RegExp(`JS:[*~^+]?(\\S*) ${script}:(\\d+):(\\d+)`);
  const cache = new Map();
  const stepOfFrame = (line, column) => {
    const key = `${line}:${column}`;
    if (!cache.has(key)) {
      const source = mapSource(line, column);
      const step = source === undefined ? "the bundle's JavaScript (unmapped)" : (FILE_STEPS.find(([re]) => re.test(source))?.[1] ?? `other: ${source.replace(/^(\.\.\/)+/, "")}`);
      cache.set(key, step);
    }
    return cache.get(key);
  };
  const counts = new Map();
  const add = (step, own) => {
    const c = counts.get(step) ?? { own: 0, beneath: 0 };
    if (own) c.own++;
    else c.beneath++;
    counts.set(step, c);
  };
  let samples = 0;
  for (const block of perfScript.split(/\n\s*\n/)) {
    const lines = block.split("\n").filter((l) => l.trim());
    if (lines.length < 2) continue;
    samples++;
    const frames = lines.slice(1).map((l) => l.trim());
    let attributed = false;
    for (let i = 0; i < frames.length; i++) {
      const m = jsFrame.exec(frames[i]);
      if (!m) continue;
      // i = 0 is the leaf: the sample is in the step's own JavaScript; deeper, in what it called.
      add(stepOfFrame(Number(m[2]), Number(m[3])), i === 0 || frames.slice(0, i).every((f) => /JS:|perf-\d+\.map/.test(f)));
      attributed = true;
      break;
    }
    if (attributed) continue;
    const stack = frames.join("\n");
    add(RUNTIME_STEPS.find(([re]) => re.test(stack))?.[1] ?? "runtime: event loop and the rest", false);
  }
  const steps = [...counts.entries()]
    .map(([step, c]) => ({ step, own: c.own, beneath: c.beneath, share: (c.own + c.beneath) / Math.max(1, samples) }))
    .sort((a, b) => b.share - a.share);
  return { samples, steps };
}

/**
 * The same samples by JavaScript function of the bundle: for each function (its name and source file), the
 * share of samples with it anywhere on the stack (inclusive: it and what it called, the runtime beneath
 * included) and the share with it as the innermost frame of the bundle. What perfSteps sums by file, spelt
 * out by function, for the few functions that matter.
 * @param {string} perfScript @param {{ bundle?: string; script?: string; top?: number }} options
 * @returns {{ samples: number; functions: Array<{ fn: string; inclusive: number; innermost: number }> }}
 */
export function perfFunctions(perfScript, options = {}) {
  const mapSource = sourceMapper(options.bundle);
  const script = (options.script ?? "worker.js").replace(/\./g, "\\.");
  const jsFrame = new RegExp(`JS:[*~^+]?(\\S*) ${script}:(\\d+):(\\d+)`);
  const names = new Map();
  const nameOf = (name, line, column) => {
    const key = `${name}:${line}:${column}`;
    if (!names.has(key)) {
      const source = mapSource(line, column);
      names.set(key, `${name.replace(/^'/, "") || "(anonymous)"} (${source === undefined ? "unmapped" : source.replace(/^(\.\.\/)+/, "")})`);
    }
    return names.get(key);
  };
  const inclusive = new Map();
  const innermost = new Map();
  let samples = 0;
  for (const block of perfScript.split(/\n\s*\n/)) {
    const lines = block.split("\n").filter((l) => l.trim());
    if (lines.length < 2) continue;
    samples++;
    const seen = new Set();
    for (const line of lines.slice(1)) {
      const m = jsFrame.exec(line);
      if (!m) continue;
      const fn = nameOf(m[1], Number(m[2]), Number(m[3]));
      if (seen.size === 0) innermost.set(fn, (innermost.get(fn) ?? 0) + 1);
      if (!seen.has(fn)) inclusive.set(fn, (inclusive.get(fn) ?? 0) + 1);
      seen.add(fn);
    }
  }
  const functions = [...inclusive.entries()]
    .map(([fn, n]) => ({ fn, inclusive: n / Math.max(1, samples), innermost: (innermost.get(fn) ?? 0) / Math.max(1, samples) }))
    .sort((a, b) => b.inclusive - a.inclusive)
    .slice(0, options.top ?? 30);
  return { samples, functions };
}
