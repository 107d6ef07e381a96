import { MULTIPLEX_PATH } from "../../../protocol/index.js";
import { expect, seqProblem, skip, type Check, type Context } from "../check.js";
import { RefusedUpgrade, type Peer } from "../peer.js";

async function openOrSkip(ctx: Context, rooms: string[]): Promise<Peer> {
  try {
    return await ctx.openMultiplexed(rooms);
  } catch (error) {
    if (error instanceof RefusedUpgrade && error.status === 404) skip(`GET ${MULTIPLEX_PATH} answered 404: this worker has no multiplexed connections (no HUBS binding)`);
    throw error;
  }
}

/**
 * G10: every room on a multiplexed connection keeps a room socket's
 * guarantees: each room's messages once and in order, events naming their
 * room, under concurrent publishers into both rooms, and across a dropped
 * connection resumed per room with `since` and `epoch`.
 */
export const multiplexOrder: Check = {
  id: "G10.multiplex-order",
  clause: "G10 multiplexed connections",
  title: "each room on one connection: in order, once, under concurrent publishers and a resume",
  timeoutMs: 40_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const rooms = [ctx.room("a"), ctx.room("b")];
    const perRoom = 30;
    const first = await openOrSkip(ctx, rooms);
    await first.waitFor((p) => p.ofType("welcome").length > 0, 10_000, "the connection's welcome");
    for (const room of rooms) first.send({ type: "subscribe", room });
    await first.waitFor((p) => p.ofType("subscribed").length === rooms.length, 10_000, "both subscribed");
    const epochs = new Map(first.ofType("subscribed").map((e) => [e.room, e.epoch]));
    const publishAll = (from: number, to: number) =>
      Promise.all(
        rooms.flatMap((room) =>
          [0, 1].map(async (publisher) => {
            for (let i = from + publisher; i <= to; i += 2) await ctx.service.publishOk(room, { room, i });
          }),
        ),
      );
    await publishAll(1, perRoom);
    for (const room of rooms) await first.waitForMessages(perRoom, 20_000, room);
    first.drop();
    await publishAll(perRoom + 1, perRoom + 10);
    const second = await openOrSkip(ctx, rooms);
    await second.waitFor((p) => p.ofType("welcome").length > 0, 10_000, "the connection's welcome");
    for (const room of rooms) {
      const read = first.messages(room);
      second.send({ type: "subscribe", room, since: read[read.length - 1]!.seq, epoch: epochs.get(room) });
    }
    await publishAll(perRoom + 11, perRoom + 15);
    const total = perRoom + 15;
    for (const room of rooms) await second.waitForMessages(total - first.messages(room).length, 20_000, room);
    for (const room of rooms) {
      const seqs = [...first.messages(room), ...second.messages(room)].map((m) => m.seq);
      const problem = seqProblem(seqs, 1, total);
      expect(problem === null, `${room} across the resume: ${problem}`);
      expect(second.ofType("lost", room).length === 0, `${room}: a resume within history was told lost`);
    }
    const stray = [...first.messages(), ...second.messages()].filter((m) => !rooms.includes((m as { room?: string }).room ?? ""));
    expect(stray.length === 0, `${stray.length} messages named no room of the connection`);
    return `2 rooms × ${total} messages (2 publishers per room at once), one connection dropped after ${perRoom} and resumed per room with since: each room 1..${total} once, in order, every event naming its room`;
  },
};
