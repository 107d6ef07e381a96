/** A closed-loop HTTP load for publishes, by autocannon: each keep-alive connection sends its next request once the last is answered. */
import autocannon from "autocannon";

export interface HttpRequestSpec {
  method: "POST";
  path: string;
  body: string;
  headers: Record<string, string>;
}

export interface HttpLoadResult {
  /** Requests answered 2xx, answered otherwise, and failed without an answer (connection errors, timeouts). */
  ok: number;
  non2xx: number;
  errors: number;
  latencyMs: { p50: number; p99: number; max: number };
}

/** A JSON POST, for a list of requests the load cycles through. */
export function jsonPost(path: string, body: unknown): HttpRequestSpec {
  return { method: "POST", path, body: typeof body === "string" ? body : JSON.stringify(body), headers: { "content-type": "application/json" } };
}

/** `connections` connections for `seconds`, cycling through `requests`. */
export function httpLoad(url: string, connections: number, seconds: number, requests: HttpRequestSpec[]): Promise<HttpLoadResult> {
  return new Promise((resolve, reject) => {
    autocannon({ url, connections, duration: seconds, requests, pipelining: 1 }, (error, result) => {
      if (error) return reject(error);
      resolve({
        ok: result.requests.total - result.non2xx - result.errors,
        non2xx: result.non2xx,
        errors: result.errors,
        latencyMs: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
      });
    });
  });
}
