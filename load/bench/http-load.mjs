// A closed-loop HTTP load generator for publishes: `connections` keep-alive
// connections, each sending its next POST as soon as the previous one is
// answered, cycling through the requests it is given, for `seconds`. Used by
// publish.mjs when autocannon is not installed; it answers with the same
// figures (requests, non-2xx, errors, latency percentiles).
import { Agent, request } from "node:http";

/**
 * @param {{ url: string; connections: number; seconds: number; requests: { method: string; path: string; body: string; headers: Record<string, string> }[] }} options
 * @returns {Promise<{ requests: { total: number }; non2xx: number; errors: number; errorCauses: Record<string, number>; latency: { p50: number; p99: number; max: number } }>}
 */
export async function runHttpLoad({ url, connections, seconds, requests }) {
  const origin = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies = [];
  const errorCauses = {};
  let total = 0;
  let non2xx = 0;
  let errors = 0;
  const deadline = performance.now() + seconds * 1000;
  const one = (spec) =>
    new Promise((resolve) => {
      const started = performance.now();
      const req = request(
        { host: origin.hostname, port: origin.port, method: spec.method, path: spec.path, agent, headers: { ...spec.headers, "content-length": Buffer.byteLength(spec.body) } },
        (res) => {
          res.resume();
          res.on("end", () => {
            total++;
            latencies.push(performance.now() - started);
            if (res.statusCode < 200 || res.statusCode > 299) non2xx++;
            resolve();
          });
        },
      );
      req.setTimeout(10_000, () => req.destroy(new Error("timeout")));
      req.on("error", (error) => {
        total++;
        errors++;
        const cause = error.code ?? error.message;
        errorCauses[cause] = (errorCauses[cause] ?? 0) + 1;
        resolve();
      });
      req.end(spec.body);
    });
  await Promise.all(
    Array.from({ length: connections }, async (_, c) => {
      // Each connection starts at a different request of the cycle.
      for (let i = c; performance.now() < deadline; i++) await one(requests[i % requests.length]);
    }),
  );
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
  return { requests: { total }, non2xx, errors, errorCauses, latency: { p50: at(0.5), p99: at(0.99), max: Math.round(latencies.at(-1) ?? 0) } };
}
