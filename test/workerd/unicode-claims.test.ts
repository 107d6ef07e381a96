import { env, exports } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { parseServerFrame } from "../../protocol";
import { createFanoutApp } from "../../worker/app";

/**
 * Text that crosses from a token or a query into a header, a URL or storage
 * must be well-formed: a correctly signed token whose claims hold a lone
 * surrogate is refused like any other bad claim (401, or close 4001), and an
 * open-mode name or data holding one is a 400. Never a 500.
 */
type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
/** The deployed entry point: wrangler.toml's vars, no secrets, so open mode. */
const open = (exports as unknown as { default: Entry }).default;
const TOKEN_SECRET = "test-token-secret";
const app = createFanoutApp();
const securedEnv = { ...(env as unknown as Record<string, unknown>), TOKEN_SECRET };
/** The same app and namespaces with subscribe tokens required. */
const worker: Entry = { fetch: async (input, init) => app.fetch(new Request(input, init), securedEnv) };

/** Answers an upgrade with HTTP statuses rather than a closed socket, to read the JSON error. */
const UPGRADE = { Upgrade: "websocket", "X-Refusal": "http" };

describe("claims with malformed Unicode", () => {
  const now = () => Math.floor(Date.now() / 1000);
  const cases: [string, Record<string, unknown>][] = [
    ["a sub with a lone high surrogate", { sub: "\ud800x" }],
    ["a sub with a lone low surrogate", { sub: "a\udc00" }],
    ["a sub with a control character", { sub: "line\nbreak" }],
    ["an info value with a lone surrogate", { sub: "alice", info: { name: "\udbff" } }],
    ["an info key with a lone surrogate", { sub: "alice", info: { ["\ud83d"]: 1 } }],
    ["a prefix with a lone surrogate", { prefix: "r\ud800" }],
  ];
  for (const [name, claims] of cases) {
    it(`refuses a signed token with ${name}: 401 with its reason, never 500`, async () => {
      const token = await sign({ room: "uni", exp: now() + 600, ...claims }, TOKEN_SECRET);
      const res = await worker.fetch(`http://edge.test/rooms/uni/ws?token=${token}`, { headers: UPGRADE });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ error: "unauthorized" });
    });
  }

  it("closes the socket of such a token with 4001 when the client takes a close code", async () => {
    const token = await sign({ room: "uni", exp: now() + 600, sub: "\ud800x" }, TOKEN_SECRET);
    const res = await worker.fetch(`http://edge.test/rooms/uni/ws?token=${token}`, { headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(101);
    const ws = res.webSocket as WebSocket;
    const closed = new Promise<number>((resolve) => ws.addEventListener("close", (e) => resolve(e.code)));
    ws.accept();
    expect(await closed).toBe(4001);
  });

  it("still admits a member named in any script, emoji included", async () => {
    const token = await sign({ room: "uni", exp: now() + 600, sub: "😀 Zoë 山田", info: { name: "Zoë 😀" } }, TOKEN_SECRET);
    const res = await worker.fetch(`http://edge.test/rooms/uni/ws?token=${token}`, { headers: UPGRADE });
    expect(res.status).toBe(101);
    const ws = res.webSocket as WebSocket;
    const first = new Promise<string>((resolve) => ws.addEventListener("message", (e) => resolve(e.data as string), { once: true }));
    ws.accept();
    // The welcome is the first event; it may share its frame with the presence that follows it.
    const parsed = parseServerFrame(await first);
    expect(parsed.ok && parsed.value[0]).toMatchObject({ type: "welcome", room: "uni" });
    ws.close(1000);
  });
});

describe("open-mode names with malformed text", () => {
  const cases: [string, string][] = [
    ["a member id with a control character", `member=${encodeURIComponent("bob\u0007")}`],
    ["member data holding an escaped lone surrogate", `member=bob&info=${encodeURIComponent('{"name":"\\ud800"}')}`],
    ["member data with a lone-surrogate key", `member=bob&info=${encodeURIComponent('{"\\udc00":1}')}`],
  ];
  for (const [name, query] of cases) {
    it(`refuses ${name} with 400 bad_request, never 500`, async () => {
      const res = await open.fetch(`http://edge.test/rooms/uni-open/ws?${query}`, { headers: { Upgrade: "websocket" } });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: "bad_request" });
    });
  }
});
