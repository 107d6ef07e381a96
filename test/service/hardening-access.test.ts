import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";

// Room stats name a room's connections and traffic: with a publish key set they
// take the key, like the room listing.

const PUBLISH_KEY = "pk-hardening-access";
let secured: LocalServer;
let open: LocalServer;

beforeAll(async () => {
  [secured, open] = await Promise.all([startServer({ vars: { PUBLISH_KEY, TOKEN_SECRET: "ts-hardening-access" } }), startServer()]);
});

afterAll(async () => {
  await Promise.all([secured?.stop(), open?.stop()]);
});

async function get(server: LocalServer, path: string, key?: string) {
  const res = await fetch(`${server.url}${path}`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, auth: res.headers.get("www-authenticate") };
}

describe("room stats and the room listing take the publish key", () => {
  it("refuses GET /rooms/{room} and GET /rooms without the key or with a wrong one", async () => {
    for (const path of ["/rooms/lobby", "/rooms"]) {
      const missing = await get(secured, path);
      expect(missing.status, path).toBe(401);
      expect(missing.json, path).toMatchObject({ error: "unauthorized" });
      expect(missing.auth, path).toMatch(/^Bearer /);
      const wrong = await get(secured, path, "not-the-key");
      expect(wrong.status, path).toBe(401);
    }
    // The key is checked before the room name, so a caller without it learns nothing about names either.
    expect((await get(secured, "/rooms/bad%20name")).status).toBe(401);
  });

  it("answers them with the key, and without one when no key is set", async () => {
    // A room nobody used is not found (looking creates nothing); one that was published into is.
    expect(await get(secured, "/rooms/lobby", PUBLISH_KEY)).toMatchObject({ status: 404, json: { error: "not_found" } });
    const published = await fetch(`${secured.url}/rooms/lobby/publish`, { method: "POST", body: "hi", headers: { authorization: `Bearer ${PUBLISH_KEY}` } });
    expect(published.status).toBe(200);
    expect(await get(secured, "/rooms/lobby", PUBLISH_KEY)).toMatchObject({ status: 200, json: { seq: 1 } });
    expect((await get(secured, "/rooms", PUBLISH_KEY)).status).toBe(200);
    expect(await get(open, "/rooms/lobby")).toMatchObject({ status: 404, json: { error: "not_found" } });
    expect((await get(secured, "/rooms/bad%20name", PUBLISH_KEY)).json).toMatchObject({ error: "bad_room" });
  });
});
