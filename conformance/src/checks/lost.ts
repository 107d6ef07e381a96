import type { HistoryPage, LostEvent } from "../../../protocol/index.js";
import { expect, seqProblem, skip, type Check } from "../check.js";

/** The most messages the history-bound check publishes: beyond that the deployment's bound is too large to reach cheaply. */
const MAX_BOUND = 64;

/**
 * G4, history renewed: a resume naming another epoch is told `lost`
 * `epoch` from 1 to the latest seq, gets none of the old messages, and
 * continues with the next live one.
 */
export const lostEpoch: Check = {
  id: "G4.lost-epoch",
  clause: "G4 lost",
  title: "a resume from another epoch is told lost 1..latest, then continues",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    for (let i = 1; i <= 3; i++) await ctx.service.publishOk(room, { i });
    const peer = await ctx.openRoom(room, { query: { since: 2, epoch: "conformance-another-history" } });
    await peer.waitFor((p) => p.ofType("lost").length > 0, 10_000, "a lost event");
    const lost = peer.ofType("lost");
    expect(lost.length === 1 && lost[0]!.reason === "epoch" && lost[0]!.from === 1 && lost[0]!.to === 3, `expected one lost {reason:"epoch",from:1,to:3}, got ${JSON.stringify(lost)}`);
    const seq = await ctx.service.publishOk(room, { i: 4 });
    await peer.waitForMessages(1, 10_000);
    const seqs = peer.messages().map((m) => m.seq);
    expect(seqs.length === 1 && seqs[0] === seq, `after lost 1..3 the socket got seqs ${seqs.join(",")}, expected only ${seq}`);
    return `since=2 with a foreign epoch: lost {epoch, 1..3}, then seq ${seq} live and nothing else`;
  },
};

/** G4, a resume point the room never reached: told `lost` `epoch` from 1 to the latest, then live. */
export const lostFutureSince: Check = {
  id: "G4.lost-future-since",
  clause: "G4 lost",
  title: "a since beyond the latest seq is told lost 1..latest",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    for (let i = 1; i <= 3; i++) await ctx.service.publishOk(room, { i });
    const stats = await ctx.service.stats(room);
    const epoch = stats.json?.epoch;
    expect(stats.status === 200 && typeof epoch === "string", `GET /rooms/${room} answered ${stats.status}: ${stats.text.slice(0, 120)}`);
    const peer = await ctx.openRoom(room, { query: { since: 1000, epoch } });
    await peer.waitFor((p) => p.ofType("lost").length > 0, 10_000, "a lost event");
    const lost = peer.ofType("lost");
    expect(lost.length === 1 && lost[0]!.reason === "epoch" && lost[0]!.from === 1 && lost[0]!.to === 3, `expected one lost {reason:"epoch",from:1,to:3}, got ${JSON.stringify(lost)}`);
    const seq = await ctx.service.publishOk(room, { i: 4 });
    await peer.waitForMessages(1, 10_000);
    expect(peer.messages().length === 1 && peer.messages()[0]!.seq === 4, `then got ${peer.messages().map((m) => m.seq).join(",")}, expected 4`);
    return `since=1000 of the room's own epoch (latest 3): lost {epoch, 1..3}, then seq ${seq}`;
  },
};

/**
 * G4, past the history bound: in a room whose ring holds few messages (a
 * HISTORY_RULES rule for `conformance-bounded-`), a resume from 0 is told
 * exactly the range history no longer holds and gets every message after it
 * once; a history page says the same range in `lost`.
 */
export const lostHistoryBound: Check = {
  id: "G4.lost-history-bound",
  clause: "G4 lost",
  title: "a resume from before the history bound: lost names exactly what is gone, socket and history page",
  timeoutMs: 30_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.boundedRoom("lost");
    await ctx.service.publishOk(room, { i: 1 });
    const stats = await ctx.service.stats(room);
    const bound = stats.json?.retention?.maxMessages;
    expect(stats.status === 200 && typeof bound === "number", `GET /rooms/${room} answered ${stats.status}, with no retention`);
    if (bound > MAX_BOUND) {
      skip(`rooms under conformance-bounded- keep ${bound} messages; a HISTORY_RULES rule {"prefix":"conformance-bounded-","maxMessages":16} lets the suite reach the bound with ${MAX_BOUND} publishes or fewer`);
    }
    const total = bound + 8;
    for (let i = 2; i <= total; i++) await ctx.service.publishOk(room, { i });
    const epoch = stats.json?.epoch as string;
    const peer = await ctx.openRoom(room, { query: { since: 0, epoch } });
    await peer.waitFor((p) => p.ofType("lost").length > 0 && p.readSeq.get("") === total, 10_000, `a lost event and messages up to ${total}`);
    const lost = peer.ofType("lost");
    expect(lost.length === 1 && lost[0]!.reason === "history" && lost[0]!.from === 1, `expected one lost {reason:"history",from:1}, got ${JSON.stringify(lost)}`);
    const to = (lost[0] as LostEvent).to;
    const seqs = peer.messages().map((m) => m.seq);
    const problem = seqProblem(seqs, to + 1, total);
    expect(problem === null, `after lost 1..${to}: ${problem}`);
    expect(total - to >= bound, `the room kept ${total - to} messages, fewer than its bound of ${bound}`);
    const page = await ctx.service.history(room, "after=0&limit=1000");
    const body = page.json as HistoryPage | undefined;
    expect(page.status === 200 && body, `GET /rooms/${room}/messages?after=0 answered ${page.status}: ${page.text.slice(0, 120)}`);
    expect(body.lost?.from === 1 && body.lost?.to === to, `the history page said lost ${JSON.stringify(body.lost)}, the socket lost 1..${to}`);
    const pageProblem = seqProblem(body.messages.map((m) => m.seq), to + 1, total);
    expect(pageProblem === null, `the history page: ${pageProblem}`);
    return `bound ${bound}, ${total} published: since=0 got lost {history, 1..${to}} then ${to + 1}..${total} once; the history page says lost 1..${to} and holds the same ${total - to}`;
  },
};
