// A directory only this user can enter (mkdtemp creates it 0700), for the
// Unix sockets the launcher talks to workerd over. It holds no secrets (the
// workerd config travels over a pipe), and it is removed when the launcher
// exits, or by the watchdog when the launcher is killed (workerd-process.mjs).

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function createPrivateDir() {
  const path = mkdtempSync(join(tmpdir(), "edge-fanout-local-"));
  return {
    path,
    /** Idempotent, synchronous: safe in an exit handler. */
    remove() {
      rmSync(path, { recursive: true, force: true });
    },
  };
}
