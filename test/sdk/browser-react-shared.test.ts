import { build } from "esbuild";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM, hasChromium, launchChromium } from "../helpers/browser-harness";
import { FakeMultiplexServer } from "../helpers/sdk-fake-multiplex-server";
import { sleep } from "../helpers/wait";

/**
 * useRoom with `connection` in headless Chromium, under React StrictMode
 * (whose double effects in development would open a subscription twice if
 * the hook did not hold it): several components, some in the same room,
 * share one FanoutClient's socket; the server sees one connection and one
 * subscribe per room; a room stays subscribed while any of its components
 * is mounted; a refused room shows as closed with its cause. The page is
 * bundled from the SDK's sources with React from the repository and served
 * by the in-process multiplexed server.
 */

const APP = `
import { StrictMode, createElement as h, useState } from "react";
import { createRoot } from "react-dom/client";
import { FanoutClient } from "./client-sdk/src/index.ts";
import { useRoom } from "./client-sdk/src/react.ts";

const fanout = (window.fanout = new FanoutClient({ url: new URL("/ws", location.href).href }));

function Room({ id, room }) {
  const { state, subscriptionCause, messages, publish, presence } = useRoom({ room, connection: fanout, keep: 10 });
  return h("section", { id, "data-state": state, "data-cause": subscriptionCause ?? "" },
    h("ul", null, messages.map((m) => h("li", { key: m.seq }, m.seq + ":" + m.data))),
    h("span", { className: "count" }, String(presence.count)),
    h("button", { className: "publish", onClick: () => publish("from " + id) }, "publish"));
}

function App() {
  const [shown, setShown] = useState({ a1: true, a2: true });
  const hide = (key) => setShown((s) => ({ ...s, [key]: false }));
  return h("div", null,
    h("button", { id: "hide-a1", onClick: () => hide("a1") }, "hide a1"),
    h("button", { id: "hide-a2", onClick: () => hide("a2") }, "hide a2"),
    shown.a1 ? h(Room, { id: "a1", room: "a" }) : null,
    shown.a2 ? h(Room, { id: "a2", room: "a" }) : null,
    h(Room, { id: "b", room: "b" }),
    h(Room, { id: "secret", room: "secret" }));
}
createRoot(document.getElementById("root")).render(h(StrictMode, null, h(App)));
`;

const items = (page: Page, id: string) => page.$$eval(`#${id} li`, (list) => list.map((li) => li.textContent));

describe("useRoom sharing one connection, in headless Chromium", () => {
  let browser: Browser | undefined;
  let bundle = "";
  beforeAll(async () => {
    if (!hasChromium) return;
    const root = new URL("../../", import.meta.url).pathname;
    const result = await build({
      stdin: { contents: APP, resolveDir: root, loader: "js" },
      bundle: true,
      format: "esm",
      write: false,
      logLevel: "silent",
      define: { "process.env.NODE_ENV": '"development"' }, // StrictMode's double effects happen in development builds only
    });
    bundle = result.outputFiles[0]!.text;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("gives components of several rooms one socket and one subscribe per room, kept while any component of the room is mounted", async (ctx) => {
    ctx.skip(!hasChromium, `no Chromium at ${CHROMIUM}; install the Debian chromium package to run the browser test`);
    const server = await FakeMultiplexServer.start({
      grants: (_token, room) => room !== "secret",
      pages: {
        "/": { type: "text/html; charset=utf-8", body: '<!doctype html><div id="root"></div><script type="module" src="/app.js"></script>' },
        "/app.js": { type: "text/javascript; charset=utf-8", body: bundle },
      },
    });
    const page = await browser!.newPage();
    try {
      const pageErrors: string[] = [];
      page.on("pageerror", (error) => pageErrors.push(error.message));
      await page.goto(`${server.host}/`);
      for (const id of ["a1", "a2", "b"]) await page.waitForSelector(`#${id}[data-state="open"][data-cause="subscribed"]`, { timeout: 15_000 });
      await page.waitForSelector('#secret[data-state="closed"][data-cause="forbidden"]', { timeout: 15_000 });

      expect(server.connections).toHaveLength(1);
      const connection = server.connections[0]!;
      expect(connection.subscribes.map((f) => f.room)).toEqual(["a", "b", "secret"]);

      server.publish("a", "to a");
      server.publish("b", "to b");
      await page.waitForFunction(() => document.querySelectorAll("#a1 li, #a2 li, #b li").length === 3, null, { timeout: 15_000 });
      expect([await items(page, "a1"), await items(page, "a2"), await items(page, "b")]).toEqual([["1:to a"], ["1:to a"], ["1:to b"]]);

      await page.click("#a2 .publish");
      await page.waitForFunction(() => document.querySelectorAll("#a1 li").length === 2, null, { timeout: 15_000 });
      expect(connection.framesOf("publish").map((f) => [f.room, f.data])).toEqual([["a", "from a2"]]);

      // One of a's components leaves: a stays subscribed for the other. The last one leaves: a is left.
      await page.click("#hide-a1");
      await page.waitForSelector("#a1", { state: "detached" });
      await sleep(200);
      expect(connection.framesOf("unsubscribe")).toEqual([]);
      server.publish("a", "still followed");
      await page.waitForFunction(() => document.querySelectorAll("#a2 li").length === 3, null, { timeout: 15_000 });
      await page.click("#hide-a2");
      await server.waitFor(() => !connection.rooms.has("a"), "the server to stop following a");
      expect(connection.framesOf("unsubscribe").map((f) => f.room)).toEqual(["a"]);
      expect(connection.rooms.has("b")).toBe(true);
      expect(server.connections).toHaveLength(1);
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
      await server.stop();
    }
  });
});
