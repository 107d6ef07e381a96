import { Socket, createServer, type Server } from "node:net";

/**
 * A TCP proxy on 127.0.0.1 in front of the local server, to break
 * connections the way networks do: drop them (the client sees an abnormal
 * close), freeze them (bytes stop flowing but nothing closes, as when a
 * network dies silently), or refuse new ones (the server looks down).
 */
export interface TcpProxy {
  port: number;
  url: string;
  wsUrl: string;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Destroys every open connection. */
  drop(): void;
  /** Stops forwarding on every open connection without closing it; new connections are unaffected. */
  freeze(): void;
  /** While true, new connections are closed as soon as they are accepted. */
  refuse(on: boolean): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  frozen: boolean;
}

export async function startProxy(targetPort: number, port = 0): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let refusing = false;
  let accepted = 0;

  const server: Server = createServer((client) => {
    accepted += 1;
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = new Socket();
    const pair: Pair = { client, upstream, frozen: false };
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("data", (chunk) => {
      if (!pair.frozen) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!pair.frozen) client.write(chunk);
    });
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
    upstream.connect(targetPort, "127.0.0.1");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  const actualPort = typeof address === "object" && address ? address.port : port;

  const drop = () => {
    for (const pair of [...pairs]) {
      pairs.delete(pair);
      pair.client.destroy();
      pair.upstream.destroy();
    }
  };
  return {
    port: actualPort,
    url: `http://127.0.0.1:${actualPort}`,
    wsUrl: `ws://127.0.0.1:${actualPort}`,
    get accepted() {
      return accepted;
    },
    drop,
    freeze() {
      for (const pair of pairs) pair.frozen = true;
    },
    refuse(on) {
      refusing = on;
    },
    close() {
      drop();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
