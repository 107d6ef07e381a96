// Starts workerd so that it cannot outlive the launcher and reads its config
// from a pipe (nothing on disk).
//
// workerd has no parent-death option and Node cannot call prctl(), so a small
// /bin/sh watchdog does it: the shell starts a background job that blocks
// reading a pipe (the lifeline) whose only writer is the launcher, then execs
// workerd in its own place (same pid). When the launcher exits in any way,
// SIGKILL included, the kernel closes the lifeline; the job's read ends
// without a line and it sends workerd SIGTERM, then SIGKILL, and removes the
// launcher's private directory. A launcher that stops workerd itself writes a
// line first, and the job exits quietly.
//
// Descriptors in the child: 0 config (read once with `serve --binary -`),
// 1 and 2 inherited, 3 lifeline, 4 the public listening socket (direct mode).

import { spawn } from "node:child_process";

const WATCHDOG = `
dir=$1
shift
{
  if read -r _ <&3; then :; else
    kill -TERM $$ 2>/dev/null
    sleep 2
    kill -KILL $$ 2>/dev/null
    [ -n "$dir" ] && rm -rf "$dir"
  fi
} </dev/null >/dev/null 2>&1 4<&- &
exec 3<&-
exec "$@"
`;

/**
 * @param {{
 *   bin: string; config: Buffer; listenFd: number | null; privateDir: string; env: NodeJS.ProcessEnv;
 * }} options
 */
export function startWorkerd(options) {
  const args = ["serve", "--binary", "--experimental", ...(options.listenFd === null ? [] : ["--socket-fd", "http=4"]), "-"];
  const child = spawn("/bin/sh", ["-c", WATCHDOG, "sh", options.privateDir, options.bin, ...args], {
    stdio: ["pipe", "inherit", "inherit", "pipe", options.listenFd ?? "ignore"],
    // Its own process group: Ctrl-C in a terminal signals the whole foreground
    // group, and workerd must outlive the signal long enough to close sockets.
    detached: true,
    env: options.env,
  });
  // A workerd that dies before reading its config is reported by its exit, not by EPIPE here.
  child.stdin?.on("error", () => undefined);
  child.stdin?.end(options.config);
  const lifeline = /** @type {import("node:net").Socket} */ (child.stdio[3]);
  lifeline.on("error", () => undefined);
  return {
    child,
    /** Tells the watchdog that workerd was stopped on purpose; call once it has exited. */
    release: () => new Promise((resolve) => lifeline.end("stopped\n", () => resolve(undefined))),
  };
}
