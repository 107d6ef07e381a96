import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { startServer } from "../helpers/server";
import { publish } from "./sdk-harness";
import { startProxy } from "./sdk-proxy";

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
const PORT = { server: 18106, proxy: 18111 } as const;

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
      await new Promise((resolve) => setTimeout(resolve, 500));
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
