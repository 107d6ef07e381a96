export interface TargetAddress {
  httpOrigin: string;
  wsOrigin: string;
  host: string;
  port: number;
  loopback: boolean;
}

/** True for names and addresses that never leave the machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Normalises a target URL (http, https, ws or wss). Anything that is not
 * loopback is refused unless `allowRemote` is set: a load run must never hit
 * someone else's machine by accident.
 */
export function parseTargetUrl(raw: string, allowRemote: boolean): TargetAddress {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`not a URL: ${raw}`);
  }
  const secure = url.protocol === "https:" || url.protocol === "wss:";
  if (!["http:", "https:", "ws:", "wss:"].includes(url.protocol)) throw new Error(`unsupported scheme ${url.protocol} (use http, https, ws or wss)`);
  const loopback = isLoopbackHost(url.hostname);
  if (!loopback && !allowRemote) {
    throw new Error(`refusing non-loopback target ${url.hostname}: pass --allow-remote to load a deployment you own`);
  }
  const port = url.port ? Number(url.port) : secure ? 443 : 80;
  const hostPort = url.host;
  return {
    httpOrigin: `${secure ? "https" : "http"}://${hostPort}`,
    wsOrigin: `${secure ? "wss" : "ws"}://${hostPort}`,
    host: url.hostname,
    port,
    loopback,
  };
}

/** Loopback source addresses to spread client sockets over (127.0.0.2 …), so ephemeral ports never run out. */
export function loopbackSources(count: number): string[] {
  return Array.from({ length: Math.max(0, Math.min(count, 250)) }, (_, i) => `127.0.0.${i + 2}`);
}
