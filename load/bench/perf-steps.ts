/**
 * Turns `perf script` output of a workerd process (run with V8's --perf-basic-prof, so JIT frames read
 * "JS:*name worker.js:LINE:COL") into per-step shares: each sample goes to the innermost JavaScript frame of the
 * bundle, mapped back to its source file through the bundle's inline source map, and within that step to "the
 * step's own JavaScript" or "the runtime beneath it" (a native frame below the JS one: SQLite under the history
 * write, the send path under the fan-out, the RPC machinery under a stub call). Samples with no JavaScript frame
 * of the bundle are the runtime's own, classified by what their stack holds (GC, SQLite, kernel, HTTP, ...).
 */
import { readFileSync } from "node:fs";
import { originalPositionFor, TraceMap } from "@jridgewell/trace-mapping";

/** Which step a source file of the bundle belongs to; first match wins. */
const FILE_STEPS: ReadonlyArray<readonly [RegExp, string]> = [
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
const RUNTIME_STEPS: ReadonlyArray<readonly [RegExp, string]> = [
  [/Heap::|Scavenger|MarkCompact|Sweeper|Marking|ConcurrentMarking|GCTracer|MinorMS|Evacuat/, "runtime: garbage collection"],
  [/fsync|fdatasync|ext4_sync|jbd2|blk_|virtblk|virtqueue/, "runtime: commit (fsync)"],
  [/sqlite3/i, "runtime: SQLite outside a JS call (commit, WAL)"],
  [/tcp_|sock_|inet_|__sys_sendmsg|__sys_recvfrom|sendmsg|recvmsg|writev|epoll/, "runtime: network syscalls"],
  [/Http|http|kj::.*Header/, "runtime: HTTP server and client"],
  [/capnp|Rpc|rpc|JsRpc|Actor|IoContext|jsg::|Worker::Lock|Isolate/, "runtime: RPC, request context, JS entry"],
];

export interface PerfStep {
  step: string;
  /** Samples in the step's own JavaScript, and in the runtime beneath it. */
  own: number;
  beneath: number;
  share: number;
}

/** Maps a frame's line and column in the bundle to its source file, through the bundle's inline source map. */
function sourceMapper(bundlePath: string | undefined): (line: number, column: number) => string | undefined {
  if (!bundlePath) return () => undefined;
  const inline = /\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/.exec(readFileSync(bundlePath, "utf8"));
  if (!inline?.[1]) return () => undefined;
  const map = new TraceMap(JSON.parse(Buffer.from(inline[1], "base64").toString("utf8")) as ConstructorParameters<typeof TraceMap>[0]);
  return (line, column) => originalPositionFor(map, { line, column: Math.max(0, column - 1) }).source ?? undefined;
}

/** `perfScript`: text of `perf script` (a header line per sample, then a frame per line); `bundle`: the bundle with an inline source map; `script`: its module name in frames. */
export function perfSteps(perfScript: string, options: { bundle?: string; script?: string } = {}): { samples: number; steps: PerfStep[] } {
  const mapSource = sourceMapper(options.bundle);
  const jsFrame = new RegExp(`JS:[*~^+]?(\\S*) ${(options.script ?? "worker.js").replace(/\./g, "\\.")}:(\\d+):(\\d+)`);
  const cache = new Map<string, string>();
  const stepOfFrame = (line: number, column: number): string => {
    const key = `${line}:${column}`;
    let step = cache.get(key);
    if (step === undefined) {
      const source = mapSource(line, column);
      step = source === undefined ? "the bundle's JavaScript (unmapped)" : (FILE_STEPS.find(([re]) => re.test(source))?.[1] ?? `other: ${source.replace(/^(\.\.\/)+/, "")}`);
      cache.set(key, step);
    }
    return step;
  };
  const counts = new Map<string, { own: number; beneath: number }>();
  const add = (step: string, own: boolean): void => {
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
    const i = frames.findIndex((f) => jsFrame.test(f));
    const m = i < 0 ? null : jsFrame.exec(frames[i] as string);
    if (m) {
      // i = 0 is the leaf: the sample is in the step's own JavaScript; deeper, in what it called.
      add(stepOfFrame(Number(m[2]), Number(m[3])), i === 0 || frames.slice(0, i).every((f) => /JS:|perf-\d+\.map/.test(f)));
      continue;
    }
    const stack = frames.join("\n");
    add(RUNTIME_STEPS.find(([re]) => re.test(stack))?.[1] ?? "runtime: event loop and the rest", false);
  }
  const steps = [...counts.entries()].map(([step, c]) => ({ step, own: c.own, beneath: c.beneath, share: (c.own + c.beneath) / Math.max(1, samples) })).sort((a, b) => b.share - a.share);
  return { samples, steps };
}

/** A function of the bundle in a profile: the share of samples with it on the stack (it and what it called), and with it innermost. */
export interface PerfFunction {
  fn: string;
  inclusive: number;
  innermost: number;
}

/**
 * The same samples by JavaScript function of the bundle: for each function (its name and source file), the
 * share of samples with it anywhere on the stack (inclusive: it and what it called, the runtime beneath
 * included) and the share with it as the innermost frame of the bundle. What perfSteps sums by file, spelt
 * out by function, for the `top` functions that matter.
 */
export function perfFunctions(perfScript: string, options: { bundle?: string; script?: string; top?: number } = {}): { samples: number; functions: PerfFunction[] } {
  const mapSource = sourceMapper(options.bundle);
  const jsFrame = new RegExp(`JS:[*~^+]?(\\S*) ${(options.script ?? "worker.js").replace(/\./g, "\\.")}:(\\d+):(\\d+)`);
  const names = new Map<string, string>();
  const nameOf = (name: string, line: number, column: number): string => {
    const key = `${name}:${line}:${column}`;
    let named = names.get(key);
    if (named === undefined) {
      const source = mapSource(line, column);
      named = `${name.replace(/^'/, "") || "(anonymous)"} (${source === undefined ? "unmapped" : source.replace(/^(\.\.\/)+/, "")})`;
      names.set(key, named);
    }
    return named;
  };
  const inclusive = new Map<string, number>();
  const innermost = new Map<string, number>();
  let samples = 0;
  for (const block of perfScript.split(/\n\s*\n/)) {
    const lines = block.split("\n").filter((l) => l.trim());
    if (lines.length < 2) continue;
    samples++;
    const seen = new Set<string>();
    for (const line of lines.slice(1)) {
      const m = jsFrame.exec(line);
      if (!m) continue;
      const fn = nameOf(m[1] ?? "", Number(m[2]), Number(m[3]));
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
