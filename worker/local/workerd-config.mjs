// Renders the workerd configuration (Cap'n Proto text) for the local server
// from the same facts wrangler.toml gives `wrangler deploy`.
// `bundleEmbedPath` is relative to the config file (Cap'n Proto embeds resolve there).

const quote = (text) => JSON.stringify(String(text));

/**
 * @param {{
 *   bundleEmbedPath: string; compatibilityDate: string; compatibilityFlags: string[];
 *   vars: Record<string, unknown>; durableObjects: { binding: string; className: string }[];
 *   address: string; dataDir: string;
 * }} options
 */
export function workerdConfig(options) {
  const bindings = [
    ...Object.entries(options.vars).map(([name, value]) =>
      `(name = ${quote(name)}, text = ${quote(typeof value === "string" ? value : JSON.stringify(value))})`,
    ),
    ...options.durableObjects.map((d) => `(name = ${quote(d.binding)}, durableObjectNamespace = ${quote(d.className)})`),
  ];
  const namespaces = options.durableObjects.map(
    (d) => `(className = ${quote(d.className)}, uniqueKey = ${quote(`edge-fanout-${d.className}`)}, enableSql = true)`,
  );
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .mainWorker),
    (name = "storage", disk = (path = ${quote(options.dataDir)}, writable = true)),
  ],
  sockets = [(name = "http", address = ${quote(options.address)}, http = (), service = "main")],
);

const mainWorker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed ${quote(options.bundleEmbedPath)})],
  compatibilityDate = ${quote(options.compatibilityDate)},
  compatibilityFlags = [${options.compatibilityFlags.map(quote).join(", ")}],
  bindings = [
    ${bindings.join(",\n    ")}
  ],
  durableObjectNamespaces = [${namespaces.join(", ")}],
  durableObjectStorage = (localDisk = "storage"),
);
`;
}
