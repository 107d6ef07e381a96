import { readFileSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM, hasChromium, launchChromium } from "../helpers/browser-harness";
import { FakeMultiplexServer } from "../helpers/sdk-fake-multiplex-server";

/**
 * The demo page with `?rooms=a,b,c` in headless Chromium: several rooms on
 * one multiplexed connection, each in its own panel, with its history, its
 * live messages, publishing from the page, and every room back after the
 * connection drops. The page and the bundle the worker serves
 * (client-sdk/demo.html, client-sdk/dist/sdk.js) come from the in-process
 * multiplexed server, on the origin of its `/ws`, as the worker serves them
 * (the run's setup builds the bundle).
 */

const sdkDir = new URL("../../client-sdk/", import.meta.url);

/** Seqs a room's panel shows, oldest first (panels list newest first). */
async function shownSeqs(page: Page, room: string): Promise<number[]> {
  const seqs = await page.$$eval(`section.room[data-room="${room}"] li.message`, (items) => items.map((li) => Number((li as HTMLElement).dataset.seq)));
  return seqs.reverse();
}

const roomState = (page: Page, room: string) => page.getAttribute(`section.room[data-room="${room}"] .sub-state`, "data-state");

describe("demo page with several rooms on one connection, in headless Chromium", () => {
  let browser: Browser | undefined;
  beforeAll(async () => {
    if (!hasChromium) return;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("follows every room of ?rooms= over one socket, with each room's history, live messages and publishes, across a drop", async (ctx) => {
    ctx.skip(!hasChromium, `no Chromium at ${CHROMIUM}; install the Debian chromium package to run the browser test`);
    let away = false;
    const server = await FakeMultiplexServer.start({
      admit: () => (away ? { close: 1013, reason: "busy" } : "welcome"),
      pages: {
        "/demo": { type: "text/html; charset=utf-8", body: readFileSync(new URL("demo.html", sdkDir), "utf8") },
        "/sdk.js": { type: "text/javascript; charset=utf-8", body: readFileSync(new URL("dist/sdk.js", sdkDir), "utf8") },
      },
    });
    const page = await browser!.newPage();
    try {
      const pageErrors: string[] = [];
      page.on("pageerror", (error) => pageErrors.push(error.message));
      // Room b has history: its panel starts with the last 20 messages.
      server.publish("b", ...Array.from({ length: 30 }, (_, i) => `earlier ${i + 1}`));

      await page.goto(`${server.host}/demo?rooms=a,b,c`);
      await page.waitForSelector('#state[data-state="open"]', { timeout: 15_000 });
      for (const room of ["a", "b", "c"]) await page.waitForSelector(`section.room[data-room="${room}"] .sub-state[data-state="subscribed"]`, { timeout: 15_000 });
      await page.waitForFunction(() => document.querySelectorAll('section.room[data-room="b"] li.message').length >= 20, null, { timeout: 15_000 });
      expect(await shownSeqs(page, "b")).toEqual(Array.from({ length: 20 }, (_, i) => i + 11));
      expect(await page.textContent("#title")).toBe("3 rooms, one connection");

      // One socket for the three rooms; b was asked for twice on it (where is it, then from 10).
      expect(server.connections).toHaveLength(1);
      const connection = server.connections[0]!;
      expect(connection.subscribes.map((f) => [f.room, f.since])).toEqual([
        ["a", undefined],
        ["b", undefined],
        ["c", undefined],
        ["b", 10],
      ]);

      server.publish("a", "to a");
      server.publish("c", "to c");
      await page.waitForFunction(() => document.querySelectorAll('section.room[data-room="a"] li.message, section.room[data-room="c"] li.message').length >= 2, null, { timeout: 15_000 });
      expect(await page.textContent('section.room[data-room="a"] li.message')).toContain("to a");
      expect(await shownSeqs(page, "c")).toEqual([1]);

      // Publishing from a room's panel publishes into that room.
      await page.fill('section.room[data-room="c"] input', '{"from":"the page"}');
      await page.click('section.room[data-room="c"] button');
      await page.waitForFunction(() => document.querySelectorAll('section.room[data-room="c"] li.message').length >= 2, null, { timeout: 15_000 });
      expect(connection.framesOf("publish").map((f) => [f.room, f.data])).toEqual([["c", { from: "the page" }]]);
      expect(await page.textContent('section.room[data-room="c"] .last-seq')).toBe("2");

      // The connection drops and stays down a moment; every room gets messages meanwhile.
      away = true;
      connection.close(1012, "restart");
      await page.waitForSelector('#state[data-state="reconnecting"]', { timeout: 15_000 });
      expect(await roomState(page, "a")).toBe("subscribing");
      server.publish("a", "while away");
      server.publish("b", "while away");
      server.publish("c", "while away");
      away = false;
      for (const room of ["a", "b", "c"]) await page.waitForSelector(`section.room[data-room="${room}"] .sub-state[data-state="subscribed"]`, { timeout: 40_000 });
      await page.waitForFunction(() => document.querySelectorAll("li.message").length >= 2 + 21 + 3, null, { timeout: 15_000 });
      expect(await shownSeqs(page, "a")).toEqual([1, 2]);
      expect(await shownSeqs(page, "b")).toEqual(Array.from({ length: 21 }, (_, i) => i + 11));
      expect(await shownSeqs(page, "c")).toEqual([1, 2, 3]);
      expect(server.open).toHaveLength(1);
      expect(await page.$$eval("li.notice", (items) => items.map((li) => li.textContent))).toEqual([]);
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
      await server.stop();
    }
  });
});
