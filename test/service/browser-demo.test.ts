import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintToken } from "../../common/tokens";
import { startServer, type LocalServer } from "../helpers/server";
import { hasChromium, launchChromium } from "../helpers/browser-harness";
import { publish } from "../helpers/sdk-harness";
import { startProxy } from "../helpers/sdk-proxy";
import { sleep } from "../helpers/wait";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const PORT = { server: 18106, proxy: 18111, secured: 18112, open: 18113 } as const;

/** Seqs of the messages the demo page shows, oldest first (the page lists newest first). */
async function shownSeqs(page: Page): Promise<number[]> {
  const seqs = await page.$$eval("#messages li.message", (items) => items.map((li) => Number((li as HTMLElement).dataset.seq)));
  return seqs.reverse();
}

async function pageState(page: Page): Promise<string | null> {
  return page.getAttribute("#state", "data-state");
}

describe("demo page in headless Chromium", () => {
  it("shows live messages, reconnects after the socket drops and misses none", async (ctx) => {
    ctx.skip(!existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}; install the Debian chromium package to run the browser test`);

    const server = await startServer({ port: PORT.server });
    const proxy = await startProxy(server.port, PORT.proxy);
    const userDataDir = mkdtempSync(join(tmpdir(), "sdk-chromium-"));
    let context: BrowserContext | undefined;
    try {
      const sdk = await fetch(`${proxy.url}/sdk.js`);
      expect(sdk.status, "GET /sdk.js (the worker serves staticRoutes from worker/static.ts)").toBe(200);
      expect(sdk.headers.get("content-type")).toMatch(/^text\/javascript/);

      context = await chromium.launchPersistentContext(userDataDir, {
        executablePath: CHROMIUM,
        headless: true,
        args: CHROMIUM_ARGS,
      });
      const page = await context.newPage();
      const pageErrors: string[] = [];
      page.on("pageerror", (error) => pageErrors.push(error.message));

      const room = `browser-${process.pid}-${Date.now().toString(36)}`;
      await page.goto(`${proxy.url}/demo?room=${room}`);
      await page.waitForSelector('#state[data-state="open"]', { timeout: 15_000 });

      let last = 0;
      for (let i = 1; i <= 20; i++) last = await publish(server.url, room, { text: `live ${i}` });
      await page.waitForFunction((n) => document.querySelectorAll("#messages li.message").length >= n, 20, { timeout: 15_000 });
      expect(await shownSeqs(page)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));

      // The connection drops and the server is unreachable for a moment; messages keep coming.
      proxy.refuse(true);
      proxy.drop();
      await page.waitForSelector('#state[data-state="reconnecting"]', { timeout: 15_000 });
      for (let i = 21; i <= 40; i++) last = await publish(server.url, room, { text: `while away ${i}` });
      await sleep(500);
      proxy.refuse(false);

      await page.waitForSelector('#state[data-state="open"]', { timeout: 40_000 });
      await page.waitForFunction((n) => document.querySelectorAll("#messages li.message").length >= n, 40, { timeout: 15_000 });
      for (let i = 41; i <= 45; i++) last = await publish(server.url, room, { text: `after ${i}` });
      await page.waitForFunction((n) => document.querySelectorAll("#messages li.message").length >= n, 45, { timeout: 15_000 });

      expect(last).toBe(45);
      expect(await shownSeqs(page)).toEqual(Array.from({ length: 45 }, (_, i) => i + 1));
      expect(await page.textContent("#last-seq")).toBe("45");
      const notices = await page.$$eval("#messages li.notice", (items) => items.map((li) => li.textContent ?? ""));
      expect(notices.filter((text) => text.includes("gone"))).toEqual([]); // no lost-messages report
      expect(await pageState(page)).toBe("open");
      expect(pageErrors).toEqual([]);
    } finally {
      await context?.close();
      await proxy.close();
      await server.stop();
      rmSync(userDataDir, { recursive: true, force: true });
    }
  });
});

describe("demo page with tokens, in headless Chromium", () => {
  const TOKEN_SECRET = "browser-demo-secret-9a4e";
  let server: LocalServer | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    if (!hasChromium) return;
    [server, browser] = await Promise.all([startServer({ port: PORT.secured, vars: { TOKEN_SECRET } }), launchChromium()]);
  });
  afterAll(async () => {
    await Promise.all([browser?.close(), server?.stop()]);
  });
  const uniqueRoom = (label: string) => `demo-${label}-${process.pid}-${Date.now().toString(36)}`;

  it("opens with ?token=, starts with the room's last 20 messages and their times, then shows live ones", async (ctx) => {
    ctx.skip(!hasChromium, `no Chromium at ${CHROMIUM}`);
    const room = uniqueRoom("history");
    const publishedAt = Date.now();
    for (let i = 1; i <= 30; i++) await publish(server!.url, room, { text: `earlier ${i}` });
    const page = await browser!.newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    await page.goto(`${server!.url}/demo?room=${room}&token=${await mintToken(TOKEN_SECRET, { room })}`);
    await page.waitForSelector('#state[data-state="open"]', { timeout: 15_000 });
    await page.waitForFunction(() => document.querySelectorAll("#messages li.message").length >= 20, null, { timeout: 15_000 });
    expect(await shownSeqs(page)).toEqual(Array.from({ length: 20 }, (_, i) => i + 11));

    const times = await page.$$eval("#messages li.message time", (items) => items.map((t) => [(t as HTMLTimeElement).dateTime, t.textContent]));
    expect(times).toHaveLength(20);
    for (const [iso, text] of times) {
      const at = Date.parse(iso!);
      expect(at).toBeGreaterThanOrEqual(publishedAt - 5000); // server clock, same machine
      expect(at).toBeLessThanOrEqual(Date.now() + 5000);
      expect(text).toMatch(/\d{1,2}.\d{2}.\d{2}/);
    }

    await publish(server!.url, room, { text: "live 31" });
    await page.waitForFunction(() => document.querySelectorAll("#messages li.message").length >= 21, null, { timeout: 15_000 });
    expect(await shownSeqs(page)).toEqual(Array.from({ length: 21 }, (_, i) => i + 11));
    expect(await page.textContent("#last-seq")).toBe("31");
    // Starting 20 messages back (?rewind=20) tells of no gap and no disconnect.
    expect(await page.$$eval("#messages li.notice", (items) => items.map((li) => li.textContent))).toEqual([]);
    expect(await pageState(page)).toBe("open");
    // The room's presence arrived: nobody who is a member (the token has no sub).
    expect(await page.getAttribute("#presence", "data-available")).toBe("true");
    expect(await page.$$eval("#members li", (items) => items.length)).toBe(0);
    // Its icon is in the page: a browser asks for no /favicon.ico, which would be a 404.
    expect(await page.$$eval('link[rel~="icon"]', (links) => links.map((l) => (l as HTMLLinkElement).href.slice(0, 5)))).toEqual(["data:"]);
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("shows a refused token's close code and reason, and stops (no retries)", async (ctx) => {
    ctx.skip(!hasChromium, `no Chromium at ${CHROMIUM}`);
    const room = uniqueRoom("refused");
    const expired = await mintToken(TOKEN_SECRET, { room, exp: Math.floor(Date.now() / 1000) - 60 });
    const elsewhere = await mintToken(TOKEN_SECRET, { room: "elsewhere" });
    const cases = [
      { query: `&token=${expired}`, notice: "connection closed (close code 4001: the token has expired)", reason: "expired_token" },
      { query: `&token=${elsewhere}`, notice: "connection closed (close code 4003: the token does not open this room)", reason: "room_not_allowed" },
      { query: "", notice: "connection closed (close code 4001: a token is required: ?token=<jwt> or subprotocol token.<jwt>)", reason: "missing_token" },
    ];
    const page = await browser!.newPage();
    for (const { query, notice } of cases) {
      await page.goto(`${server!.url}/demo?room=${room}${query}`);
      await page.waitForSelector('#state[data-state="closed"]', { timeout: 15_000 });
      expect(await page.$$eval("#messages li.notice", (items) => items.map((li) => li.textContent))).toEqual([notice]);
    }
    await sleep(1500); // retries would have come by now
    const refusals = server!.output().split("\n").filter((l) => l.includes(`"room":"${room}"`) && l.includes('"event":"refusal"'));
    expect(refusals.map((l) => (JSON.parse(l) as { reason: string; close: number }).reason)).toEqual(cases.map((c) => c.reason));

    // Not only the SDK: a bare WebSocket in the page sees the code and reason too (an HTTP 401 would be a bare 1006).
    const bare = await page.evaluate(
      (url) =>
        new Promise<[number, string]>((resolve) => {
          const ws = new WebSocket(url);
          ws.onclose = (e) => resolve([e.code, e.reason]);
        }),
      `${server!.wsUrl}/rooms/${room}/ws?token=${expired}`,
    );
    expect(bare).toEqual([4001, "the token has expired"]);
    await page.close();
  });

  it("shows who is in the room: members from their tokens, joins as they come, leaves after the delay", async (ctx) => {
    ctx.skip(!hasChromium, `no Chromium at ${CHROMIUM}`);
    const room = uniqueRoom("presence");
    const tokenFor = (sub: string, name: string) => mintToken(TOKEN_SECRET, { room, sub, info: { name } });
    const alice = await browser!.newPage();
    const pageErrors: string[] = [];
    alice.on("pageerror", (error) => pageErrors.push(error.message));
    await alice.goto(`${server!.url}/demo?room=${room}&token=${await tokenFor("u-alice", "Alice")}`);
    await alice.waitForSelector('#members li[data-member="u-alice"]', { timeout: 15_000 });
    const names = () => alice.$$eval("#members li", (items) => items.map((li) => li.textContent).sort());
    expect(await names()).toEqual(["Alice"]);

    // Bob opens two tabs: one member, two connections.
    const bob1 = await browser!.newPage();
    const bob2 = await browser!.newPage();
    const bobToken = await tokenFor("u-bob", "Bob");
    await bob1.goto(`${server!.url}/demo?room=${room}&token=${bobToken}`);
    await bob2.goto(`${server!.url}/demo?room=${room}&token=${bobToken}`);
    await alice.waitForSelector('#members li[data-member="u-bob"]', { timeout: 15_000 });
    expect(await alice.textContent("#member-count")).toBe("2 here");
    // A tab's picture comes from its sync, which counts the member's sockets at that moment.
    await bob2.waitForFunction(() => document.querySelector('#members li[data-member="u-bob"]')?.textContent === "Bob (2 tabs)", null, { timeout: 15_000 });
    const listed = (await (await fetch(`${server!.url}/rooms/${room}/presence`)).json()) as { members: { id: string; connections: number }[] };
    expect(listed.members.map((m) => [m.id, m.connections])).toEqual([["u-alice", 1], ["u-bob", 2]]);

    // Bob closes both tabs; after the leave delay (3 s) Alice sees him gone.
    await bob1.close();
    await bob2.close();
    await alice.waitForFunction(() => document.querySelector('#members li[data-member="u-bob"]') === null, null, { timeout: 15_000 });
    expect(await names()).toEqual(["Alice"]);
    expect(pageErrors).toEqual([]);
    await alice.close();
  });
});

describe("demo page in open mode, in headless Chromium", () => {
  let server: LocalServer | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    if (!hasChromium) return;
    [server, browser] = await Promise.all([startServer({ port: PORT.open }), launchChromium()]);
  });
  afterAll(async () => {
    await Promise.all([browser?.close(), server?.stop()]);
  });

  it("puts a visitor named in its URL (?member=, &info=) in the room's presence, unverified", async (ctx) => {
    ctx.skip(!hasChromium, `no Chromium at ${CHROMIUM}`);
    const room = `demo-named-${process.pid}-${Date.now().toString(36)}`;
    const demo = (query: string) => `${server!.url}/demo?room=${room}${query}`;
    const pageErrors: string[] = [];
    const open = async (query: string) => {
      const page = await browser!.newPage();
      page.on("pageerror", (error) => pageErrors.push(error.message));
      await page.goto(demo(query));
      await page.waitForSelector('#state[data-state="open"]', { timeout: 15_000 });
      return page;
    };
    const listed = (page: Page) => page.$$eval("#members li", (items) => items.map((li) => [(li as HTMLElement).dataset.member, li.textContent]));

    // Someone who did not name themselves sees how to, and is not listed.
    const viewer = await open("");
    expect(await viewer.isVisible("#naming")).toBe(true);
    expect(await viewer.textContent("#naming")).toContain("&member=<id>");

    const alice = await open(`&member=alice&info=${encodeURIComponent(JSON.stringify({ name: "Alice" }))}`);
    await alice.waitForSelector('#members li[data-member="alice"]', { timeout: 15_000 });
    expect(await alice.isVisible("#naming")).toBe(false);
    expect(await listed(alice)).toEqual([["alice", "Alice (unverified)"]]);
    await viewer.waitForSelector('#members li[data-member="alice"]', { timeout: 15_000 });

    // A member without info is shown by id; info that is not a JSON object is left out, and said so.
    const bob = await open("&member=bob&info=not-json");
    await viewer.waitForSelector('#members li[data-member="bob"]', { timeout: 15_000 });
    expect(await bob.$$eval("#messages li.notice", (items) => items.map((li) => li.textContent))).toEqual([
      "info is not a JSON object, so it was left out: not-json",
    ]);
    expect(await listed(viewer)).toEqual([
      ["alice", "Alice (unverified)"],
      ["bob", "bob (unverified)"],
    ]);
    expect(await viewer.textContent("#member-count")).toBe("2 here");

    // The room's own list agrees: the names came from the page's URL, over the socket.
    const presence = (await (await fetch(`${server!.url}/rooms/${room}/presence`)).json()) as {
      members: { id: string; info?: unknown; connections: number; verified: boolean }[];
    };
    expect(presence.members).toEqual([
      { id: "alice", info: { name: "Alice" }, connections: 1, verified: false },
      { id: "bob", connections: 1, verified: false },
    ]);
    expect(pageErrors).toEqual([]);
    await Promise.all([viewer.close(), alice.close(), bob.close()]);
  });
});
