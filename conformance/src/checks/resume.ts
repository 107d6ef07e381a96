import { expect, seqProblem, type Check } from "../check.js";

/**
 * G3 across a lost connection: a reader whose TCP connection vanishes (no
 * close frame, as a network drop) while messages keep being published
 * reconnects with `since` and `epoch` and gets exactly the ones it missed,
 * from history, then live ones: none twice, none skipped.
 */
export const resumeAfterDrop: Check = {
  id: "G3.resume-after-drop",
  clause: "G3 exactly-once",
  title: "resume with since and epoch after a dropped connection",
  timeoutMs: 30_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    const first = await ctx.openRoom(room);
    await first.waitForWelcome();
    const epoch = first.welcome()!.epoch;
    for (let i = 1; i <= 10; i++) await ctx.service.publishOk(room, { i });
    await first.waitForMessages(10, 10_000);
    first.drop();
    const read = first.messages().map((m) => m.seq);
    const last = read[read.length - 1] as number;
    for (let i = 11; i <= 20; i++) await ctx.service.publishOk(room, { i });
    const second = await ctx.openRoom(room, { query: { since: last, epoch } });
    await second.waitForMessages(20 - last, 10_000);
    const welcome = second.welcome();
    expect(welcome?.epoch === epoch, `the resumed socket's welcome named epoch ${welcome?.epoch}, not ${epoch}`);
    expect(second.ofType("lost").length === 0, `a resume within history was told lost: ${JSON.stringify(second.ofType("lost"))}`);
    for (let i = 21; i <= 25; i++) await ctx.service.publishOk(room, { i });
    await second.waitForMessages(25 - last, 10_000);
    const all = [...read, ...second.messages().map((m) => m.seq)];
    const problem = seqProblem(all, 1, 25);
    expect(problem === null, `across the drop: ${problem}`);
    const data = second.messages().map((m) => (m.data as { i: number }).i);
    expect(data.every((i, n) => i === last + 1 + n), `the resumed messages carried the wrong data: ${data.join(",")}`);
    return `read 1..${last}, dropped; 10 published while away came from history as ${last + 1}..20, then 21..25 live: 1..25 once, in order`;
  },
};
