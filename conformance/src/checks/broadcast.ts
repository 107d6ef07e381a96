import { randomUUID } from "node:crypto";
import type { BroadcastResult } from "../../../protocol/index.js";
import { expect, sleep, type Check } from "../check.js";

/**
 * G9: a broadcast is, in each room, the room's next message; repeated with
 * its Idempotency-Key it reaches nobody twice and says every room was a
 * duplicate; the answer accounts for every room.
 */
export const broadcastIdempotent: Check = {
  id: "G9.broadcast-idempotent",
  clause: "G9 broadcast",
  title: "POST /broadcast with a key twice: each room's next seq once, then duplicates",
  timeoutMs: 30_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const rooms = [ctx.room("a"), ctx.room("b"), ctx.room("c")];
    const readers = await Promise.all(rooms.map((room) => ctx.openRoom(room)));
    for (const [i, room] of rooms.entries()) await ctx.service.publishOk(room, { before: i });
    await Promise.all(readers.map((r) => r.waitForMessages(1, 10_000)));
    const key = `conformance-${randomUUID()}`;
    const data = { broadcast: key };
    const first = await ctx.service.broadcast({ data, rooms }, key);
    const a = first.json as BroadcastResult | undefined;
    expect(first.status === 200 && a, `the broadcast answered ${first.status} ${first.text.slice(0, 160)}`);
    expect(a.idempotencyKey === key && a.rooms === 3 && a.duplicates === 0 && a.duplicate === false && a.failedCount === 0 && a.failed.length === 0 && a.refused === 0, `the first broadcast answered ${first.text.slice(0, 200)}`);
    await Promise.all(readers.map((r) => r.waitForMessages(2, 10_000)));
    const again = await ctx.service.broadcast({ data, rooms }, key);
    const b = again.json as BroadcastResult | undefined;
    expect(again.status === 200 && b, `the repeated broadcast answered ${again.status} ${again.text.slice(0, 160)}`);
    expect(b.rooms === 3 && b.duplicates === 3 && b.duplicate === true && b.sockets === 0 && b.failedCount === 0, `the repeated broadcast answered ${again.text.slice(0, 200)}, expected rooms 3, duplicates 3, duplicate true, sockets 0`);
    for (const [i, room] of rooms.entries()) await ctx.service.publishOk(room, { after: i });
    await Promise.all(readers.map((r) => r.waitForMessages(3, 10_000)));
    await sleep(200);
    for (const [i, reader] of readers.entries()) {
      const got = reader.messages().map((m) => `${m.seq}:${JSON.stringify(m.data)}`);
      const expected = [`1:${JSON.stringify({ before: i })}`, `2:${JSON.stringify(data)}`, `3:${JSON.stringify({ after: i })}`];
      expect(JSON.stringify(got) === JSON.stringify(expected), `${rooms[i]}: got ${got.join(" ")}, expected ${expected.join(" ")}`);
    }
    return `first: rooms 3, sockets ${a.sockets}, duplicates 0; repeated: duplicates 3, duplicate true, sockets 0; each room got it once as seq 2, between its own 1 and 3`;
  },
};
