import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Duplex } from "node:stream";
import WebSocket, { WebSocketServer, type RawData } from "ws";

/**
 * A man in the middle on 127.0.0.1 that speaks the service's HTTP and
 * WebSocket faithfully (statuses, bodies, subprotocols, close codes and
 * reasons) and breaks one promise on purpose: with `duplicateMessage`, the
 * first server frame of each socket that carries a `message` event is sent
 * twice. A conformance suite run through it must notice.
 */
export interface FaultProxy {
  url: string;
  /** Frames it sent twice so far. */
  readonly duplicated: number;
  close(): Promise<void>;
}

export interface FaultOptions {
  duplicateMessage: boolean;
}

/** Close codes a peer may send in a close frame (RFC 6455 7.4): others end the TCP connection instead. */
const sendable = (code: number) => (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);

const HOP_BY_HOP = new Set(["host", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade", "content-encoding"]);

function forwardHeaders(headers: IncomingMessage["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith("sec-websocket")) continue;
    out[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

function carriesMessage(data: RawData, isBinary: boolean): boolean {
  if (isBinary) return false;
  try {
    const value: unknown = JSON.parse(data.toString());
    return (Array.isArray(value) ? value : [value]).some((e) => typeof e === "object" && e !== null && (e as { type?: unknown }).type === "message");
  } catch {
    return false;
  }
}

/** The close frame a ws socket received, as soon as it arrives (workerd may hold the TCP connection open for seconds after it). */
function onCloseFrame(ws: WebSocket, handler: (code: number, reason: Buffer) => void): void {
  let done = false;
  const once = (code: number, reason: Buffer) => {
    if (done) return;
    done = true;
    handler(code, reason);
  };
  ws.on("close", once);
  ws.once("open", () => (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver?.on("conclude", once));
}

export async function startFaultProxy(upstreamUrl: string, options: FaultOptions): Promise<FaultProxy> {
  const upstreamWs = upstreamUrl.replace(/^http/, "ws");
  const sockets = new Set<WebSocket>();
  let duplicated = 0;

  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    try {
      const answer = await fetch(`${upstreamUrl}${req.url}`, {
        method: req.method,
        headers: forwardHeaders(req.headers),
        body: req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks),
      });
      const body = Buffer.from(await answer.arrayBuffer());
      const headers: Record<string, string> = {};
      answer.headers.forEach((value, name) => {
        if (!HOP_BY_HOP.has(name)) headers[name] = value;
      });
      res.writeHead(answer.status, headers).end(body);
    } catch (error) {
      res.writeHead(502).end(String(error));
    }
  });

  // The server selects fanout.v1 whenever it is offered (and refuses offers without it, an answer relayed as is).
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols) => (protocols.has("fanout.v1") ? "fanout.v1" : false) });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const offered = (req.headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim()).filter(Boolean);
    const upstream = new WebSocket(`${upstreamWs}${req.url}`, offered, { headers: forwardHeaders(req.headers) });
    sockets.add(upstream);
    upstream.once("unexpected-response", (_r, answer) => {
      const chunks: Buffer[] = [];
      answer.on("data", (chunk: Buffer) => chunks.push(chunk));
      answer.on("end", () => {
        const body = Buffer.concat(chunks);
        const type = answer.headers["content-type"] ?? "application/json";
        socket.end(`HTTP/1.1 ${answer.statusCode} ${answer.statusMessage}\r\ncontent-type: ${type}\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body.toString()}`);
      });
    });
    upstream.once("error", () => socket.destroy());
    // Frames the server sends before the client side is up (a refusal's close comes at once) wait here.
    const early: [RawData, boolean][] = [];
    let earlyClose: [number, Buffer] | null = null;
    let client: WebSocket | null = null;
    let faulted = false;
    const toClient = (data: RawData, isBinary: boolean) => {
      if (!client) return void early.push([data, isBinary]);
      client.send(data, { binary: isBinary });
      if (options.duplicateMessage && !faulted && carriesMessage(data, isBinary)) {
        faulted = true;
        duplicated++;
        client.send(data, { binary: isBinary });
      }
    };
    const closeClient = (code: number, reason: Buffer) => {
      if (!client) return void (earlyClose = [code, reason]);
      if (sendable(code)) client.close(code, reason);
      else client.terminate();
    };
    upstream.on("message", toClient);
    onCloseFrame(upstream, closeClient);
    upstream.once("open", () => {
      wss.handleUpgrade(req, socket, head, (ws) => {
        client = ws;
        sockets.add(ws);
        ws.on("message", (data, isBinary) => upstream.readyState === WebSocket.OPEN && upstream.send(data, { binary: isBinary }));
        onCloseFrame(ws, (code, reason) => {
          if (upstream.readyState !== WebSocket.OPEN) return;
          if (sendable(code)) upstream.close(code, reason);
          else upstream.terminate();
        });
        ws.on("error", () => upstream.terminate());
        for (const [data, isBinary] of early.splice(0)) toClient(data, isBinary);
        if (earlyClose) closeClient(...earlyClose);
      });
    });
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    get duplicated() {
      return duplicated;
    },
    close: async () => {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
