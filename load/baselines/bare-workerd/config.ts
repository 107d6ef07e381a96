/**
 * The bare baseline's workerd config: the same compatibility date and flags as
 * the service (wrangler.toml), one Durable Object class with SQLite, a socket
 * bound to loopback. Encoded with the local server's serializer.
 */

/** Same runtime settings as the service, so the comparison is of code, not of flags (the PartyServer baseline's too). */
export const COMPATIBILITY_DATE = "2026-04-26";
export const COMPATIBILITY_FLAGS = ["no_web_socket_compression"];

export interface BareConfigOptions {
  bundle: string;
  /** host:port to listen on; always a loopback address. */
  address: string;
  durable: boolean;
  dataDir: string;
  /** V8 flags for the whole process (workerd's config has no per-worker ones). */
  v8Flags: string[];
}

export function bareWorkerdConfig(options: BareConfigOptions): unknown {
  return {
    ...(options.v8Flags.length ? { v8Flags: options.v8Flags } : {}),
    services: [
      {
        name: "main",
        worker: {
          modules: [{ name: "worker.js", esModule: options.bundle }],
          compatibilityDate: COMPATIBILITY_DATE,
          compatibilityFlags: COMPATIBILITY_FLAGS,
          bindings: [
            { name: "DURABLE", text: options.durable ? "1" : "0" },
            { name: "ROOMS", durableObjectNamespace: { className: "BareRoom" } },
          ],
          durableObjectNamespaces: [{ className: "BareRoom", uniqueKey: "bare-workerd-BareRoom", enableSql: true }],
          durableObjectStorage: { localDisk: "storage" },
        },
      },
      { name: "storage", disk: { path: options.dataDir, writable: true } },
    ],
    sockets: [{ name: "http", address: options.address, http: {}, service: { name: "main" } }],
  };
}
