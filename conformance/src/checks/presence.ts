import type { PresenceEvent } from "../../../protocol/index.js";
import { expect, sleep, type Check } from "../check.js";
import type { Peer } from "../peer.js";

/** The documented default of PRESENCE_LEAVE_DELAY_MS; the checks assume a deployment keeps at least a third of it. */
const LEAVE_DELAY_MS = 3000;

const presenceOf = (peer: Peer, action?: PresenceEvent["action"]) => peer.ofType("presence").filter((e) => action === undefined || e.action === action);

/**
 * G8: a member is an identity, not a socket. Two sockets of one member are
 * one member with two connections (one join, a count of 1); closing one of
 * them is no leave; closing the last is a leave, after the leave delay.
 */
export const memberOnce: Check = {
  id: "G8.member-once",
  clause: "G8 presence",
  title: "a member with two sockets is counted once; it leaves only after its last socket, after the delay",
  timeoutMs: 30_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    const observer = await ctx.openRoom(room);
    await observer.waitFor((p) => presenceOf(p, "sync").length > 0, 10_000, "a presence sync");
    const member = "conformance-member";
    const tab1 = await ctx.openRoom(room, { member });
    await observer.waitFor((p) => presenceOf(p, "join").length > 0, 10_000, "the member's join");
    const tab2 = await ctx.openRoom(room, { member });
    await tab2.waitFor((p) => presenceOf(p, "sync").length > 0, 10_000, "the second tab's sync");
    const sync = presenceOf(tab2, "sync")[0]!;
    expect(sync.count === 1, `the second tab's sync counted ${sync.count} members, expected 1`);
    const page = await ctx.service.presence(room);
    const listed = page.json?.members ?? [];
    expect(page.status === 200 && page.json?.count === 1 && listed.length === 1 && listed[0]?.id === member && listed[0]?.connections === 2, `GET /rooms/${room}/presence answered ${page.status} ${page.text.slice(0, 160)}, expected one member ${member} with 2 connections`);
    tab1.close();
    await sleep(LEAVE_DELAY_MS / 3 + 500);
    expect(presenceOf(observer, "leave").length === 0, "closing one of the member's two sockets was announced as a leave");
    expect(presenceOf(observer, "join").length === 1, `the observer saw ${presenceOf(observer, "join").length} joins for one member`);
    const closedAt = Date.now();
    tab2.close();
    await observer.waitFor((p) => presenceOf(p, "leave").length > 0, LEAVE_DELAY_MS + 10_000, "the member's leave");
    const after = Date.now() - closedAt;
    const leave = presenceOf(observer, "leave")[0]!;
    expect(leave.action === "leave" && leave.member.id === member && leave.count === 0, `the leave was ${JSON.stringify(leave)}`);
    expect(after >= LEAVE_DELAY_MS / 3, `the leave came ${after} ms after the last socket closed: sooner than a leave delay could be`);
    return `one join (count 1) for two sockets; presence lists ${member} once with 2 connections; no leave while a socket stayed; leave ${after} ms after the last socket closed`;
  },
};

/**
 * G8: a reconnect within the leave delay (a reload) is neither a leave nor a
 * join for the others.
 */
export const reloadIsNoLeave: Check = {
  id: "G8.reload-within-delay",
  clause: "G8 presence",
  title: "a member that reconnects within the leave delay is neither a leave nor a join",
  timeoutMs: 30_000,
  needsSockets: true,
  needsPublishKey: false,
  async run(ctx) {
    const room = ctx.room("");
    const observer = await ctx.openRoom(room);
    await observer.waitFor((p) => presenceOf(p, "sync").length > 0, 10_000, "a presence sync");
    const member = "conformance-reloader";
    const before = await ctx.openRoom(room, { member });
    await observer.waitFor((p) => presenceOf(p, "join").length > 0, 10_000, "the member's join");
    before.close();
    await sleep(200);
    const again = await ctx.openRoom(room, { member });
    await again.waitFor((p) => presenceOf(p, "sync").length > 0, 10_000, "the reloaded socket's sync");
    await sleep(LEAVE_DELAY_MS + 1000);
    const leaves = presenceOf(observer, "leave").length;
    const joins = presenceOf(observer, "join").length;
    expect(leaves === 0 && joins === 1, `the observer saw ${joins} joins and ${leaves} leaves for a reload within the delay, expected 1 join and no leave`);
    const sync = presenceOf(again, "sync")[0]!;
    expect(sync.count === 1, `the reloaded socket's sync counted ${sync.count}, expected 1`);
    return `closed and reopened within 200 ms: over ${LEAVE_DELAY_MS + 1000} ms the observer saw 1 join, no leave, no second join`;
  },
};
