// Client for the worker's admin routes (worker/local-routes.ts), over the
// Unix socket workerd serves them on. Only that socket carries the admin
// header (workerd injects it), so these requests cannot come from anyone
// else and their answers can only come from the workerd this launcher started.

import { Agent, request } from "node:http";

/**
 * @param {string} socketPath
 * @param {string} [mount] where the worker mounts the fan-out app ("" for the root)
 */
export function adminClient(socketPath, mount = "") {
  const agent = new Agent({ keepAlive: true, maxSockets: 2 });
  /**
   * @param {"GET" | "POST"} method
   * @param {string} path under /__local
   * @param {unknown} [body]
   * @param {number} [timeoutMs]
   * @returns {Promise<{ status: number; json: any }>}
   */
  const call = (method, path, body, timeoutMs = 5000) =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = request(
        {
          socketPath,
          agent,
          method,
          path: `${mount}/__local${path}`,
          headers: { host: "localhost", ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}) },
          timeout: timeoutMs,
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk) => (text += chunk));
          res.on("end", () => {
            try {
              resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) });
            } catch {
              resolve({ status: res.statusCode ?? 0, json: null });
            }
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`admin ${path} timed out`)));
      req.on("error", reject);
      req.end(payload);
    });
  return { call, close: () => agent.destroy() };
}
