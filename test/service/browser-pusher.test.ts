import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pusherRoom } from "../../protocol/pusher";
import { APP, backEnd, connected, frontEnd, pusherVars, record } from "../helpers/pusher";
import { startServer, type LocalServer } from "../helpers/server";
import { publish } from "../helpers/socket";
import { CHROMIUM, hasChromium, launchChromium } from "../helpers/browser-harness";

/**
 * pusher-js's browser build, as an app's page loads it, against the Pusher
 * front door in headless Chromium: the page's back end signs its private and
 * presence channels with the stock server SDK at an auth endpoint of its own
 * (as Laravel or an Express app would); a Node pusher-js client is the other
 * member of the presence channel.
 */
const PAGE = `<!doctype html><meta charset="utf-8"><script src="/pusher.min.js"></script>
<script>
  const params = new URLSearchParams(location.search);
  window.seen = [];
  const pusher = new Pusher(${JSON.stringify(APP.key)}, {
    cluster: "local", wsHost: "127.0.0.1", wsPort: Number(params.get("port")), forceTLS: false,
    enabledTransports: ["ws"], disableStats: true,
    channelAuthorization: { endpoint: "/pusher/auth", transport: "ajax" },
  });
  for (const name of ["prices", "private-orders", "presence-desk"]) {
    pusher.subscribe(name).bind_global((event, data) => window.seen.push({ channel: name, event, data }));
  }
</script>`;

const require = createRequire(import.meta.url);
const PUSHER_JS = readFileSync(require.resolve("pusher-js/dist/web/pusher.min.js"), "utf8");

describe.skipIf(!hasChromium)(`pusher-js's browser build in headless Chromium (${CHROMIUM})`, () => {
  let server: LocalServer;
  let site: Server;
  let siteUrl = "";
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    server = await startServer({ env: { ...pusherVars(), PUBLISH_KEY: "browser-pusher" } });
    const signer = backEnd(server);
    // The app's own site: its page, pusher-js, and the auth endpoint pusher-js posts to.
    site = createServer((req, res) => {
      if (req.url?.startsWith("/pusher/auth")) {
        let body = "";
        req.on("data", (chunk: Buffer) => (body += chunk.toString()));
        req.on("end", () => {
          const form = new URLSearchParams(body);
          const socketId = form.get("socket_id") ?? "";
          const channel = form.get("channel_name") ?? "";
          const auth = channel.startsWith("presence-") ? signer.authorizeChannel(socketId, channel, { user_id: "browser", user_info: { via: "chromium" } }) : signer.authorizeChannel(socketId, channel);
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(auth));
        });
        return;
      }
      if (req.url === "/pusher.min.js") return void res.writeHead(200, { "content-type": "text/javascript" }).end(PUSHER_JS);
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(PAGE);
    });
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", () => resolve()));
    const address = site.address();
    siteUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    browser = await launchChromium();
    page = await browser.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => (site ? site.close(() => resolve()) : resolve()));
    await server?.stop();
  });

  const seen = (channel: string, event: string): Promise<unknown[]> =>
    page.evaluate(([c, e]) => (window as unknown as { seen: { channel: string; event: string; data: unknown }[] }).seen.filter((s) => s.channel === c && s.event === e).map((s) => s.data), [channel, event] as const);

  const waitSeen = async (channel: string, event: string, count: number): Promise<unknown[]> => {
    await page.waitForFunction(
      ([c, e, n]) => (window as unknown as { seen: { channel: string; event: string }[] }).seen.filter((s) => s.channel === c && s.event === e).length >= n,
      [channel, event, count] as const,
      { timeout: 15_000 },
    );
    return seen(channel, event);
  };

  it("subscribes to public, private and presence channels, signed by the page's back end", async () => {
    await page.goto(`${siteUrl}/?port=${server.port}`);
    for (const channel of ["prices", "private-orders", "presence-desk"]) await waitSeen(channel, "pusher:subscription_succeeded", 1);
    const [desk] = (await seen("presence-desk", "pusher:subscription_succeeded")) as { count: number; me: { info: unknown } }[];
    expect(desk).toMatchObject({ count: 1, me: { info: { via: "chromium" } } });
  });

  it("gets events once each and in order, and sees a Node client join its presence channel", async () => {
    for (let n = 1; n <= 50; n++) {
      await publish(server.url, encodeURIComponent(pusherRoom(APP.id, "prices")), { n }, { headers: { authorization: "Bearer browser-pusher" } });
    }
    await publish(server.url, encodeURIComponent(pusherRoom(APP.id, "private-orders")), { order: 7 }, { headers: { authorization: "Bearer browser-pusher" } });
    expect(await waitSeen("prices", "message", 50)).toEqual(Array.from({ length: 50 }, (_, i) => ({ n: i + 1 })));
    expect(await waitSeen("private-orders", "message", 1)).toEqual([{ order: 7 }]);

    const node = frontEnd(server, { user: { id: "node", info: { via: "node" } } });
    try {
      await connected(node);
      const desk = record(node, "presence-desk");
      const [picture] = (await desk.waitFor("pusher:subscription_succeeded")) as { members: Record<string, unknown> }[];
      expect(picture?.members).toEqual({ browser: { via: "chromium" }, node: { via: "node" } });
      expect(await waitSeen("presence-desk", "pusher:member_added", 1)).toEqual([{ id: "node", info: { via: "node" } }]);
    } finally {
      node.disconnect();
    }
  });
});
