import { afterAll, afterEach } from "vitest";
import { startServer, type LocalServer, type ServerOptions } from "./server";

export interface ManagedServersOptions {
  /** Stop them after each test (the default), or once, after the last test of the file or block. */
  stopAfter?: "each" | "all";
  /**
   * How they are stopped: SIGKILL by default, since a test may leave a server
   * in any state and only its exit matters; SIGTERM for the graceful stop.
   */
  signal?: NodeJS.Signals;
}

/**
 * Local servers a test file starts and never has to stop: every server
 * started through the returned function is stopped after each test (or
 * after all of them), however the test ended. Called at a file's top level
 * it covers the file; inside a `describe`, that block's tests.
 */
export function managedServers({ stopAfter = "each", signal = "SIGKILL" }: ManagedServersOptions = {}): (options?: ServerOptions) => Promise<LocalServer> {
  const started: LocalServer[] = [];
  (stopAfter === "each" ? afterEach : afterAll)(async () => {
    await Promise.all(started.splice(0).map((server) => server.stop(signal)));
  });
  return async (options?: ServerOptions) => {
    const server = await startServer(options);
    started.push(server);
    return server;
  };
}
